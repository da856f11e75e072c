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
	return cli.Control{Command: command, Verb: "release", Default: []api.JobState{api.JobHeld},
		Act:  cli.Action("release"),
		Done: "Job <%s> is released.\n"}.Run(args, stdout, stderr)
}
