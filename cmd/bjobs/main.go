// Command bjobs lists jobs as LSF's bjobs does: its columns, its state
// names (PEND, RUN, DONE, EXIT, PSUSP, USUSP) and its time formats, for
// the tools and scripts written for LSF. bqueue is troupe's own view.
package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

const prog = "bjobs"

var command = cli.Command{
	Name:     prog,
	Synopsis: "[JOBID...]",
	Summary: "List jobs as LSF's bjobs does: by default your unfinished jobs, with LSF's\n" +
		"columns and states (PEND, PSUSP, RUN, USUSP, DONE, EXIT). Job ids show those jobs,\n" +
		"finished or not. bqueue(1) is troupe's own, richer view.",
	Examples: []string{
		"bjobs",
		"bjobs -a -u all             # everyone's jobs, finished ones too",
		"bjobs -w 42                 # job 42, names and hosts in full",
		"bjobs -noheader -o 'jobid stat' -aJ '*run1*'",
		"bjobs -o \"jobid:8 stat exit_code delimiter=','\"",
		"bjobs -W -q gpu",
		"bjobs -u all -m 'node01 node02'   # jobs running on node01 or node02",
		"bjobs -m troupe -a -w -W 42  # the cluster's name: the whole cluster",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// boolLetters and valueLetters are bjobs's one-letter options, which
// LSF lets one write together: -aJ NAME is -a -J NAME.
const (
	boolLetters  = "awWrpds"
	valueLetters = "uqJom"
)

// splitLetters expands "-aJ" into "-a", "-J" (LSF's grouped options);
// anything else is left as it is.
func splitLetters(args []string) []string {
	var out []string
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && grouped(a[1:]) {
			for _, c := range a[1:] {
				out = append(out, "-"+string(c))
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

func grouped(s string) bool {
	for i, c := range s {
		last := i == len(s)-1
		if !strings.ContainsRune(boolLetters, c) && !(last && strings.ContainsRune(valueLetters, c)) {
			return false
		}
	}
	return true
}

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	all := fs.Bool("a", false, "finished jobs too (DONE, EXIT)")
	wide := fs.Bool("w", false, "wide: values in full, not cut to their column")
	long := fs.Bool("W", false, "LSF's -W columns: PROJ_NAME CPU_USED MEM SWAP PIDS START_TIME FINISH_TIME,\ntimes as MM/DD-HH:MM:SS, values in full")
	running := fs.Bool("r", false, "running jobs only (RUN, USUSP)")
	pending := fs.Bool("p", false, "pending jobs only (PEND, PSUSP)")
	done := fs.Bool("d", false, "finished jobs only (DONE, EXIT)")
	susp := fs.Bool("s", false, "suspended jobs only (PSUSP, USUSP)")
	userName := fs.String("u", "", "jobs of `user` (\"all\": everyone's; default: yours)")
	queue := fs.String("q", "", "jobs of `queue` (troupe's partition)")
	name := fs.String("J", "", "jobs whose name matches `pattern` (* matches any characters)")
	format := fs.String("o", "", "LSF's output `format`: \"field[:[-]width] ... [delimiter='c']\", fields:\n"+strings.Join(cli.BjobsFieldNames(), " "))
	noHeader := fs.Bool("noheader", false, "no header line")
	hostsOf := cli.HostsFlag(fs, "jobs with a container on these `hosts` (node names, space-separated in one argument);\n"+
		"the cluster's name (lsid prints it) means the whole cluster")
	pos, err := fs.Parse(splitLetters(args))
	if err != nil {
		return fs.Exit(err)
	}
	ids, err := cli.ParseJobIDs(pos)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	var (
		fields []cli.BjobsField
		delim  string
	)
	if *format != "" {
		if *wide || *long {
			return fs.UsageError("-o chooses the columns; it goes with neither -w nor -W")
		}
		if fields, delim, err = cli.ParseBjobsFormat(*format); err != nil {
			return fs.UsageError("-o: %v", err)
		}
	}
	hosts, err := hostsOf()
	if err != nil {
		return fs.UsageError("%v", err)
	}
	who := *userName
	if who == "" {
		who = cli.CurrentUser()
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	if !hosts.Whole() {
		nodes, err := c.Nodes(ctx)
		if err != nil {
			return cli.Fail(stderr, prog, err)
		}
		if bad := hosts.Unknown(nodes.Nodes); len(bad) > 0 {
			for _, n := range bad {
				fmt.Fprintf(stderr, "%s: Bad host name, host group name or cluster name\n", n)
			}
			return cli.ExitFail
		}
	}
	var list api.JobList
	if len(ids) > 0 {
		list, err = jobsOf(ctx, c, ids)
	} else {
		// Schedd picks the user's (by its user index), the queue's and,
		// unless finished ones are asked for, the unfinished jobs; the
		// filters below apply again.
		list, err = c.JobsWhere(ctx, serverQuery(who, *queue, *all || *done), 0, 0)
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	states := stateFilter(*all, *running, *pending, *done, *susp)
	code := cli.ExitOK
	var jobs []api.Job
	list.Jobs = cli.LSFArrays(list.Jobs) // an array's elements as jobs of its id
	if len(ids) > 0 {
		byID := map[uint64][]api.Job{}
		for _, j := range list.Jobs {
			byID[j.ID] = append(byID[j.ID], j)
		}
		for _, id := range ids {
			js, ok := byID[id]
			if !ok {
				fmt.Fprintf(stderr, "Job <%d> is not found\n", id)
				code = cli.ExitFail
				continue
			}
			for _, j := range js {
				if match(j, *userName, *queue, *name) && hosts.Match(j) && (states == nil || states(j)) {
					jobs = append(jobs, j)
				}
			}
		}
	} else {
		if states == nil {
			states = func(j api.Job) bool { return !j.State.Terminal() }
		}
		for _, j := range cli.SortQueue(list.Jobs) {
			if match(j, who, *queue, *name) && hosts.Match(j) && states(j) {
				jobs = append(jobs, j)
			}
		}
	}
	if len(jobs) == 0 {
		if len(ids) == 0 {
			fmt.Fprintln(stderr, noneFound(*all, *done, *running, *pending, *susp))
		}
		return code
	}
	now := time.Now()
	if fields != nil {
		err = cli.WriteBjobsFields(stdout, jobs, fields, delim, !*noHeader, now)
	} else {
		view := cli.BjobsDefault
		switch {
		case *long:
			view = cli.BjobsLong
		case *wide:
			view = cli.BjobsWide
		}
		err = cli.WriteBjobs(stdout, jobs, view, !*noHeader, now)
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	return code
}

// jobsOf asks schedd for each job ids names, finished or not, and for a
// job array its elements that have come up (those that have not wait
// behind the array's own row): one answer per id, whatever the number
// of other jobs. An id schedd does not know is left out.
func jobsOf(ctx context.Context, c *client.Client, ids []uint64) (api.JobList, error) {
	var list api.JobList
	for _, id := range ids {
		j, _, err := c.JobRef(ctx, api.JobRef{ID: id}, 0, 0)
		switch {
		case client.IsNotFound(err):
			continue
		case err != nil:
			return list, err
		}
		list.Jobs = append(list.Jobs, j)
		if j.Array == nil {
			continue
		}
		es, err := c.ArrayElements(ctx, id)
		if err != nil {
			return list, err
		}
		for _, e := range es.Jobs {
			if e.ID != 0 { // an element without a row yet shows in the array's
				list.Jobs = append(list.Jobs, e)
			}
		}
	}
	return list, nil
}

// serverQuery is what schedd filters the list on (GET /v1/jobs): the
// user (none for "all"), the queue, and the unfinished jobs unless
// ended ones are wanted.
func serverQuery(who, queue string, ended bool) url.Values {
	q := url.Values{}
	if who != "all" {
		q.Set("user", who)
	}
	if queue != "" {
		q.Set("partition", queue)
	}
	if !ended {
		q.Set("ended", "false")
	}
	return q
}

// stateFilter is the filter -a -r -p -d -s ask for; nil: none (ids are
// shown whatever their state; the list shows unfinished jobs).
func stateFilter(all, running, pending, done, susp bool) func(api.Job) bool {
	var want []string
	if running {
		want = append(want, cli.LSFRun, cli.LSFUSusp)
	}
	if pending {
		want = append(want, cli.LSFPend, cli.LSFPSusp)
	}
	if done {
		want = append(want, cli.LSFDone, cli.LSFExit)
	}
	if susp {
		want = append(want, cli.LSFPSusp, cli.LSFUSusp, cli.LSFSSusp)
	}
	switch {
	case len(want) > 0:
		return func(j api.Job) bool { return slices.Contains(want, cli.LSFState(j)) }
	case all:
		return func(api.Job) bool { return true }
	}
	return nil
}

// match applies -u, -q and -J.
func match(j api.Job, who, queue, name string) bool {
	return (who == "" || who == "all" || j.User == who) &&
		(queue == "" || j.Partition == queue) &&
		(name == "" || cli.MatchName(name, j.Name))
}

// noneFound is LSF's message for an empty answer.
func noneFound(all, done, running, pending, susp bool) string {
	switch {
	case done:
		return "No DONE/EXIT job found"
	case running:
		return "No running job found"
	case pending:
		return "No pending job found"
	case susp:
		return "No suspended job found"
	case all:
		return "No job found"
	}
	return "No unfinished job found"
}
