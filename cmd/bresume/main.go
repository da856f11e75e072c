// Command bresume resumes jobs bstop suspended, as LSF's bresume does: a
// held job goes back to the queue, a stopped one's containers get
// SIGCONT.
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

const prog = "bresume"

var command = cli.Command{
	Name:     prog,
	Synopsis: "[JOBID...]",
	Summary: "Resume suspended jobs, as LSF's bresume does: a held job (PSUSP) is released\n" +
		"back to the queue; every process of a stopped running job (USUSP) gets SIGCONT.\n" +
		"Ids that fail are reported; the others are still resumed, and the exit status is\n" +
		"1. With -u, -t, -p or -J the jobs are chosen from the queue (your own held and\n" +
		"running ones unless -u or -t says otherwise).",
	Examples: []string{
		"bresume 42",
		"bresume -u alice            # all of alice's suspended jobs (as root)",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return cli.Control{Command: command, Verb: "resume",
		Default: []api.JobState{api.JobHeld, api.JobScheduled, api.JobPreparing, api.JobRunning},
		Act:     resume,
		Done:    "Job <%s> is being resumed\n"}.Run(args, stdout, stderr)
}

// resume releases a held job and sends SIGCONT to a running one's
// containers, or to a placed one's (bstop before they started) so that
// they start running.
func resume(c *client.Client) func(context.Context, api.JobRef) (api.Job, error) {
	return func(ctx context.Context, id api.JobRef) (api.Job, error) {
		j, _, err := c.JobRef(ctx, id, 0, 0)
		if err != nil {
			return j, err
		}
		switch j.State {
		case api.JobHeld:
			return c.Control(ctx, id, "release", nil)
		case api.JobRunning, api.JobScheduled, api.JobPreparing:
			return c.SignalRef(ctx, id, api.SignalJob{Signal: "CONT"})
		}
		return j, fmt.Errorf("job %s is %s (%s): only suspended jobs can be resumed", id, j.State, cli.LSFState(j))
	}
}
