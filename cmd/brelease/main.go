// Command brelease releases held jobs, as LSF's brelease and Slurm's
// scontrol release do: a released job goes back to PENDING and is
// scheduled as any other.
package main

import (
	"io"
	"os"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
)

const prog = "brelease"

var command = cli.Command{
	Name:     prog,
	Synopsis: "[JOBID...]",
	Summary: "Release held jobs: a HELD job goes back to PENDING and is scheduled as any\n" +
		"other, keeping its submit time. Only HELD jobs can be released. Ids that fail\n" +
		"are reported; the others are still released, and the exit status is 1. With\n" +
		"-u, -t, -p or -J the jobs are chosen from the queue (your own unless -u says\n" +
		"otherwise; HELD ones unless -t says otherwise); with ids as well, only the ids\n" +
		"that match are released.",
	Examples: []string{
		"brelease 42",
		"brelease 42 43 44",
		"brelease -t HELD            # all my held jobs",
		"brelease -u alice -p gpu    # alice's held jobs in partition gpu",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	sel := cli.SelectFlags(fs, "release")
	sel.Default = []api.JobState{api.JobHeld}
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	ids, err := cli.ParseJobIDs(pos)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	if err := sel.Check(); err != nil {
		return fs.UsageError("%v", err)
	}
	if len(ids) == 0 && !sel.Active() {
		return fs.UsageError("missing job id (or -u, -t, -p, -J to choose jobs)")
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	if sel.Active() {
		if ids, err = sel.Pick(ctx, c, ids); err != nil {
			return cli.Fail(stderr, prog, err)
		}
	}
	return cli.ForEachJob(ctx, stdout, stderr, prog, ids, c.Release, "Job <%d> is released.\n")
}
