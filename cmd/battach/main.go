// Command battach connects this terminal to the terminal of an
// interactive job's main1 (one submitted with bsub -I), as Slurm's
// sattach does: to come back after a detach (Ctrl-]) or a lost
// connection, or to share the session from a second terminal.
package main

import (
	"io"
	"os"

	"github.com/troupe-hpc/troupe/internal/cli"
)

const prog = "battach"

var command = cli.Command{
	Name:     prog,
	Synopsis: "JOBID",
	Summary: "Connect this terminal to interactive job JOBID's terminal (bsub -I), waiting until\n" +
		"it runs. Ctrl-] detaches and leaves the job running; the exit status is the\n" +
		"command's when it ends while attached.",
	Examples: []string{
		"battach 42",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	id, code, ok := fs.OneJobID(pos)
	if !ok {
		return code
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	return cli.Terminal{Prog: prog, Client: c, JobID: id, Stdin: stdin, Stdout: stdout, Stderr: stderr}.Run(ctx)
}
