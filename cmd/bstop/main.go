// Command bstop suspends jobs, as LSF's bstop does: a pending job is held
// (PSUSP), a running one has all its containers' processes stopped with
// SIGSTOP (USUSP) until bresume.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

const prog = "bstop"

var command = cli.Command{
	Name:     prog,
	Synopsis: "[JOBID...]",
	Summary: "Suspend jobs, as LSF's bstop does: a pending job is held (bjobs shows PSUSP,\n" +
		"bqueue HELD); every process of a running job's containers is stopped with SIGSTOP\n" +
		"(bjobs shows USUSP), also one placed but not started yet (bjobs shows RUN), whose\n" +
		"containers then start stopped; its walltime goes on. bresume undoes either. Ids that fail\n" +
		"are reported; the others are still stopped, and the exit status is 1. With -u,\n" +
		"-t, -p or -J the jobs are chosen from the queue (your own pending and running\n" +
		"ones unless -u or -t says otherwise).",
	Examples: []string{
		"bstop 42",
		"bstop -t RUN                # all my running jobs",
		"bstop 42 && bresume 42",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return cli.Control{Command: command, Verb: "stop",
		Default: []api.JobState{api.JobPending, api.JobScheduled, api.JobPreparing, api.JobRunning},
		Act:     stop,
		Done:    "Job <%s> is being stopped\n"}.Run(args, stdout, stderr)
}

// stop holds a pending job and sends SIGSTOP to a running one's
// containers. A job placed but not started yet (bjobs shows RUN) gets the
// SIGSTOP recorded, and its containers start stopped; a held job is
// already suspended (PSUSP) and stays so. A pending job placed between
// the look and the hold is looked at again and stopped as placed.
func stop(c *client.Client) func(context.Context, api.JobRef) (api.Job, error) {
	return func(ctx context.Context, id api.JobRef) (api.Job, error) {
		for tries := 0; ; tries++ {
			j, _, err := c.JobRef(ctx, id, 0, 0)
			if err != nil {
				return j, err
			}
			switch j.State {
			case api.JobPending:
				held, err := c.Control(ctx, id, "hold", nil)
				if err != nil && tries < 3 {
					if now, _, err2 := c.JobRef(ctx, id, 0, 0); err2 == nil && now.State != j.State {
						continue // placed (or ended) meanwhile
					}
				}
				return held, err
			case api.JobHeld:
				return j, nil
			case api.JobRunning, api.JobScheduled, api.JobPreparing:
				return c.SignalRef(ctx, id, api.SignalJob{Signal: "STOP"})
			}
			return j, fmt.Errorf("job %s is %s (%s): only pending and running jobs can be stopped", id, j.State, cli.LSFState(j))
		}
	}
}
