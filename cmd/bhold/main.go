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
	return cli.Control{Command: command, Verb: "hold", Default: []api.JobState{api.JobPending},
		Act:  cli.Action("hold"),
		Done: "Job <%s> is held.\n"}.Run(args, stdout, stderr)
}
