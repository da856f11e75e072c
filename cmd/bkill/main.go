// Command bkill cancels jobs, or signals them (-s), as LSF's bkill and
// Slurm's scancel do.
package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

const prog = "bkill"

var command = cli.Command{
	Name:     prog,
	Synopsis: "[JOBID | \"JOBID[INDEX]\"...]",
	Summary: "Cancel jobs: a pending job leaves the queue, a running one has its containers\n" +
		"stopped; either ends CANCELLED. Ids that fail are reported; the others are still\n" +
		"cancelled, and the exit status is 1. With -u, -t, -p or -J the jobs are chosen\n" +
		"from the queue (your own unless -u says otherwise); with ids as well, only the\n" +
		"ids that match are cancelled, as scancel does. With -s, a running job's containers\n" +
		"get the signal instead and the job goes on (it ends as its exit says); a job not\n" +
		"running yet is cancelled by KILL, TERM or INT and refuses other signals. With -d\n" +
		"the killed job ends COMPLETED (LSF's DONE) instead of CANCELLED.",
	Examples: []string{
		"bkill 42",
		"bkill 42 43 44",
		"bkill -t PEND               # all my pending jobs",
		"bkill -u alice -p gpu       # all of alice's jobs in partition gpu",
		"bkill -s USR1 42            # every container of job 42 gets SIGUSR1",
		"bkill -s HUP --host main1 42",
		"bkill -d 42                 # kill it, record it DONE (COMPLETED)",
		"bkill 12                    # job array 12: every element",
		"bkill \"12[5]\"               # element 5 of job array 12",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return cli.Control{Command: command, Verb: "cancel", Hosts: true, Options: options}.Run(args, stdout, stderr)
}

// options defines -s, --host and -d; once parsed, they choose what is
// done to each job: cancelled (recorded DONE with -d), or signalled.
func options(fs *cli.FlagSet) func(*cli.Control) error {
	signal := fs.String("s", "", "send `signal` (USR1, SIGHUP, 15, …) to the job's containers instead of cancelling it;\na job not running yet is cancelled by KILL, TERM or INT")
	fs.Alias("signal", "s")
	host := fs.String("host", "", "with -s, signal only the container `host` (main1, sub2, …)")
	done := fs.Bool("d", false, "kill the jobs but record them as DONE (COMPLETED), as LSF's bkill -d")
	return func(c *cli.Control) error {
		if *signal == "" {
			if *host != "" {
				return cli.UsageErr("--host picks the container -s signals; give -s too")
			}
			var q url.Values
			if *done {
				q = url.Values{"done": {"true"}}
			}
			c.Act = func(cl *client.Client) func(context.Context, api.JobRef) (api.Job, error) {
				return func(ctx context.Context, r api.JobRef) (api.Job, error) { return cl.Control(ctx, r, "kill", q) }
			}
			c.Done = "Job <%s> is being terminated.\n"
			return nil
		}
		sig, err := api.ParseSignal(*signal)
		if err != nil {
			return fmt.Errorf("-s: %w", err)
		}
		if *done {
			return cli.UsageErr("-d records a killed job as DONE; it goes with no -s")
		}
		req := api.SignalJob{Signal: api.SignalName(int(sig)), Host: *host}
		c.Act = func(cl *client.Client) func(context.Context, api.JobRef) (api.Job, error) {
			return func(ctx context.Context, r api.JobRef) (api.Job, error) { return cl.SignalRef(ctx, r, req) }
		}
		c.Done = "Job <%s> is being signalled (SIG" + req.Signal + ").\n"
		return nil
	}
}
