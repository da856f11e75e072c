package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
)

var scancelOpts = []option{
	{'n', "name", true}, {0, "jobname", true}, {'u', "user", true}, {'p', "partition", true},
	{'t', "state", true}, {'s', "signal", true}, {'A', "account", true}, {'Q', "quiet", false},
	{'f', "full", false}, {'b', "batch", false}, {'v', "verbose", false}, {0, "me", false},
	{'h', "help", false}, {0, "usage", false},
}

// scancel cancels jobs (or signals them with -s) as Slurm's scancel:
// by id, or all the jobs the filters pick.
func scancel(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const prog = "scancel"
	opts, rest, err := getopt(args, scancelOpts, false, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nTry \"scancel --help\" for more information\n", prog, err)
		return 1
	}
	var (
		names, users, parts, states, accounts []string
		signal                                string
		quiet, batch                          bool
	)
	for _, o := range opts {
		switch o.name {
		case "name", "jobname":
			names = list(names, o.value)
		case "user":
			users = list(users, o.value)
		case "me":
			users = append(users, cli.CurrentUser())
		case "partition":
			parts = list(parts, o.value)
		case "state":
			states = list(states, o.value)
		case "account":
			accounts = list(accounts, o.value)
		case "signal":
			signal = o.value
		case "quiet":
			quiet = true
		case "batch":
			batch = true
		case "help", "usage":
			return usage(stdout, prog, "[OPTIONS...] [JOBID...]", []string{
				"-s, --signal=SIG      send SIG (name or number) instead of cancelling",
				"-b, --batch           with -s: to the batch script's container (main1) only",
				"-n, --name=NAMES      jobs of these names",
				"-u, --user=USERS      these users' jobs (--me: yours)",
				"-p, --partition=LIST  jobs of these partitions; -A, --account=LIST: charged to these accounts",
				"-t, --state=LIST      jobs in these states: PENDING, RUNNING, SUSPENDED",
				"-Q, --quiet           no message for jobs already ended",
			})
		}
	}
	sels, err := jobSels(rest)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	if len(sels) == 0 && len(names)+len(users)+len(parts)+len(states)+len(accounts) == 0 {
		return fail(stderr, prog, "No job identification provided")
	}
	want, err := stateSet(states)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	if signal != "" {
		if _, err := api.ParseSignal(signal); err != nil {
			return fail(stderr, prog, "Invalid job signal: %s", signal)
		}
	}
	c, err := newClient(prog, stderr)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	targets := make([]api.JobRef, len(sels))
	for i, sel := range sels { // 12_3 is element 3 of array 12 alone, as Slurm's
		targets[i] = api.JobRef{ID: sel.id, Index: sel.index, Element: sel.element}
	}
	if len(names)+len(users)+len(parts)+len(states)+len(accounts) > 0 {
		l, err := c.Jobs(ctx, 0, 0)
		if err != nil {
			return fail(stderr, prog, "%v", err)
		}
		targets = nil
		for _, j := range l.Jobs {
			if !j.State.Terminal() &&
				named(sels, j) &&
				(len(names) == 0 || slices.Contains(names, j.Name)) &&
				(len(users) == 0 || slices.Contains(users, j.User)) &&
				(len(parts) == 0 || slices.Contains(parts, j.Partition)) &&
				(len(accounts) == 0 || slices.Contains(accounts, cli.JobAccount(j))) &&
				(want == nil || want[cli.SlurmState(j)]) {
				targets = append(targets, api.JobRef{ID: j.ID})
			}
		}
	}
	code := 0
	for _, ref := range targets {
		id := slurmRef(ref)
		var j api.Job
		if signal != "" {
			req := api.SignalJob{Signal: signal}
			if batch {
				req.Host = "main1"
			}
			j, err = c.SignalRef(ctx, ref, req)
		} else {
			j, err = c.Control(ctx, ref, "kill", nil)
		}
		switch {
		case err != nil && strings.Contains(err.Error(), "not found"):
			fmt.Fprintf(stderr, "%s: error: Kill job error on job id %s: Invalid job id specified\n", prog, id)
			code = 1
		case err != nil:
			fmt.Fprintf(stderr, "%s: error: Kill job error on job id %s: %v\n", prog, id, err)
			code = 1
		case signal == "" && j.State.Terminal() && j.State != api.JobCancelled && !quiet:
			fmt.Fprintf(stderr, "%s: error: Kill job error on job id %s: Job/step already completing or completed\n", prog, id)
		}
	}
	return code
}

// slurmRef writes ref as Slurm writes a job id: 12, or 12_3 for element
// 3 of array 12.
func slurmRef(ref api.JobRef) string {
	if ref.Element {
		return fmt.Sprintf("%d_%d", ref.ID, ref.Index)
	}
	return fmt.Sprint(ref.ID)
}

// named says whether sels is empty or names j: by its own id, or as
// element of its array (12_3).
func named(sels []jobSel, j api.Job) bool {
	return len(sels) == 0 || slices.ContainsFunc(sels, func(s jobSel) bool {
		if s.element {
			return j.ArrayID == s.id && j.ArrayIndex == s.index
		}
		return j.ID == s.id
	})
}
