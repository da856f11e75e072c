// Command bhold holds pending jobs, as LSF's bhold and Slurm's
// scontrol hold do: a held job stays in the queue but is never started
// until brelease.
package main

import (
	"io"
	"os"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
)

const prog = "bhold"

var command = cli.Command{
	Name:     prog,
	Synopsis: "[JOBID...]",
	Summary: "Hold pending jobs: a held job (HELD) keeps its place in the queue but is not\n" +
		"started until brelease puts it back. Only PENDING jobs can be held. Ids that\n" +
		"fail are reported; the others are still held, and the exit status is 1. With\n" +
		"-u, -t, -p or -J the jobs are chosen from the queue (your own unless -u says\n" +
		"otherwise; PENDING ones unless -t says otherwise); with ids as well, only the ids\n" +
		"that match are held.",
	Examples: []string{
		"bhold 42",
		"bhold 42 43 44",
		"bhold -t PEND               # all my pending jobs",
		"bhold -u alice -p gpu       # alice's pending jobs in partition gpu",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	sel := cli.SelectFlags(fs, "hold")
	sel.Default = []api.JobState{api.JobPending}
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
	return cli.ForEachJob(ctx, stdout, stderr, prog, ids, c.Hold, "Job <%d> is held.\n")
}
