// Command bkill cancels jobs, as LSF's bkill and Slurm's scancel do.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

const prog = "bkill"

var command = cli.Command{
	Name:     prog,
	Synopsis: "JOBID...",
	Summary: "Cancel jobs: a pending job leaves the queue, a running one has its containers\n" +
		"stopped; either ends CANCELLED. Ids that fail are reported; the others are still\n" +
		"cancelled, and the exit status is 1.",
	Examples: []string{
		"bkill 42",
		"bkill 42 43 44",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	if len(pos) == 0 {
		return fs.UsageError("missing job id")
	}
	ids := make([]uint64, len(pos))
	for i, s := range pos {
		if ids[i], err = cli.ParseJobID(s); err != nil {
			return fs.UsageError("%v", err)
		}
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	code := cli.ExitOK
	for _, id := range ids {
		_, err := c.Kill(ctx, id)
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "Job <%d> is being terminated.\n", id)
		case errors.Is(err, client.ErrUnreachable), ctx.Err() != nil:
			// The rest would fail the same way.
			return cli.Fail(stderr, prog, err)
		case client.IsNotFound(err):
			code = cli.Fail(stderr, prog, fmt.Errorf("job %d: not found", id))
		default: // schedd's refusal names the job already
			code = cli.Fail(stderr, prog, err)
		}
	}
	return code
}
