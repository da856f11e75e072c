// Command bqueue lists jobs, as LSF's bjobs and Slurm's squeue do.
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
	"github.com/troupe-hpc/troupe/internal/backoff"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

const prog = "bqueue"

var command = cli.Command{
	Name: prog,
	Summary: "List jobs: by default those not yet ended (pending, starting, running).\n" +
		"TIME is the time since start for a running job, since submission for a\n" +
		"waiting one, and the run time of an ended one. A job array shows as one line,\n" +
		"12[1-100], its REASON its elements by state (RUN 10 PEND 90); --array lists\n" +
		"its elements instead, 12[1] to 12[100].",
	Examples: []string{
		"bqueue",
		"bqueue -a -u alice          # all of alice's jobs, ended ones too",
		"bqueue --watch              # redraw on every change until Ctrl-C",
		"bqueue --start              # pending jobs with their expected start",
		"bqueue -s PEND -p gpu       # pending jobs of partition gpu",
		"bqueue -o wide              # more columns: limits, resources, times",
		"bqueue -O jobid,user,state,time_limit,reason",
		"bqueue -o json | jq '.[].id'",
		"bqueue --array              # each job array's elements, one line each",
	},
}

// Blocking queries wait this long for a change.
var blockWait = 30 * time.Second

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	fs.OutputFlag(cli.FormatWide)
	all := fs.Bool("a", false, "show ended jobs too")
	userName := fs.String("u", "", "show only the jobs of `user` (\"all\": everyone's, the default)")
	partition := fs.String("p", "", "show only the jobs of these `partitions` (comma-separated)")
	fs.Alias("partition", "p")
	states := fs.String("s", "", "show only jobs in these `states` (comma-separated: PENDING, RUNNING, …, LSF's\nPEND, RUN, DONE, EXIT or Slurm's PD, R, CD, F); naming an ended state shows ended jobs")
	account := fs.String("A", "", "show only the jobs charged to these `accounts` (comma-separated)")
	fs.Alias("account", "A")
	columns := fs.String("O", "", "show these `columns`, comma- or space-separated, as squeue -O and bjobs -o do:\n"+
		strings.ToLower(strings.Join(cli.ColumnNames(), ",")))
	fs.Alias("format", "O")
	watch := fs.Bool("watch", false, "redraw on every change until Ctrl-C")
	fs.Alias("w", "watch")
	expand := fs.Bool("array", false, "list each job array's elements, one line each (12[1], 12[2], …), as squeue -r\ndoes, instead of one line for the array")
	fs.Alias("r", "array")
	start := fs.Bool("start", false, "list pending jobs with the scheduler's expected start (START_TIME)\nfor those that hold a backfill reservation")
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	if len(pos) > 0 {
		return fs.UsageError("unexpected argument %q", pos[0])
	}
	q := query{format: fs.Format(), start: *start, expand: *expand}
	q.filter = cli.JobFilter{Ended: *all, Partitions: cli.SplitList(*partition), Accounts: cli.SplitList(*account)}
	if *userName != "" {
		q.filter.Users = []string{*userName}
	}
	if *states != "" {
		if q.filter.States, err = cli.ParseStates(*states); err != nil {
			return fs.UsageError("-s: %v", err)
		}
	}
	q.server = serverQuery(q.filter)
	switch {
	case *columns != "":
		if q.start || q.format != cli.FormatTable {
			return fs.UsageError("-O chooses the table's columns; it goes with neither --start nor -o %s", q.format)
		}
		if q.columns, err = cli.LookupColumns(*columns); err != nil {
			return fs.UsageError("-O: %v", err)
		}
	case q.format == cli.FormatWide:
		if q.start {
			return fs.UsageError("--start has its own columns; it goes with -o table or json")
		}
		q.columns = cli.MustColumns(cli.WideColumns)
	default:
		q.columns = cli.MustColumns(cli.QueueColumns)
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	if !*watch && q.format == cli.FormatJSON {
		if err := q.streamJSON(ctx, c, stdout); err != nil {
			return cli.Fail(stderr, prog, err)
		}
		return cli.ExitOK
	}
	if !*watch {
		list, err := q.list(ctx, c, 0, 0)
		if err != nil {
			return cli.Fail(stderr, prog, err)
		}
		if err := q.render(stdout, list.Jobs, time.Now()); err != nil {
			return cli.Fail(stderr, prog, err)
		}
		return cli.ExitOK
	}
	if err := q.watch(ctx, c, stdout); err != nil {
		return cli.Fail(stderr, prog, err)
	}
	return cli.ExitOK
}

// serverQuery is the part of f schedd filters on (GET /v1/jobs): users,
// partitions, states, and ended jobs left out unless asked for. Accounts
// and names are matched here only (a job's account may be its default).
func serverQuery(f cli.JobFilter) url.Values {
	q := url.Values{}
	for _, u := range f.Users {
		if u == "all" {
			q.Del("user")
			break
		}
		q.Add("user", u)
	}
	for _, p := range f.Partitions {
		q.Add("partition", p)
	}
	for _, st := range f.States {
		if st == cli.JobSuspended {
			st = api.JobRunning // schedd's state of a suspended job; the filter picks them here
		}
		if !slices.Contains(q["state"], string(st)) {
			q.Add("state", string(st))
		}
	}
	if !f.Ended {
		q.Set("ended", "false")
	}
	return q
}

type query struct {
	filter  cli.JobFilter
	server  url.Values // what schedd picks (serverQuery); filter is applied again here
	format  cli.Format
	columns []cli.Column
	start   bool // --start: pending jobs and their expected start
	expand  bool // --array: job arrays' elements, not the arrays' own rows
}

// list asks schedd for the queue (a blocking query after index). Job
// arrays come as their own rows (the elements' rows are dropped); with
// --array each array's row is replaced by all its elements, those that
// have not come up yet too.
func (q query) list(ctx context.Context, c *client.Client, index uint64, wait time.Duration) (api.JobList, error) {
	list, err := c.JobsWhere(ctx, q.server, index, wait)
	if err != nil {
		return list, err
	}
	list.Jobs = cli.FoldArrays(list.Jobs)
	if !q.expand {
		return list, nil
	}
	var out []api.Job
	for _, j := range list.Jobs {
		if j.Array == nil {
			out = append(out, j)
			continue
		}
		es, err := c.ArrayElements(ctx, j.ID)
		if err != nil {
			return list, err
		}
		out = append(out, es.Jobs...)
	}
	list.Jobs = out
	return list, nil
}

// streamJSON writes -o json as render does, a job at a time as it comes
// off schedd's answer (in job id order, as render sorts them; an
// array's elements, with --array, in index order where its row was):
// neither the answer nor the list is held, so that every user's queue
// costs bqueue one job's memory. An error cut short leaves the list
// unfinished on stdout, and bqueue fails.
func (q query) streamJSON(ctx context.Context, c *client.Client, w io.Writer) error {
	out := cli.NewJSONList(w)
	add := func(j api.Job) error {
		if !q.filter.Match(j) {
			return nil
		}
		return out.Add(j)
	}
	_, err := c.EachJob(ctx, q.server, 0, 0, func(j api.Job) error {
		switch {
		case j.ArrayID != 0:
			return nil // an element: its array's row stands for it (cli.FoldArrays)
		case q.expand && j.Array != nil:
			es, err := c.ArrayElements(ctx, j.ID)
			if err != nil {
				return err
			}
			for _, e := range es.Jobs {
				if err := add(e); err != nil {
					return err
				}
			}
			return nil
		}
		return add(j)
	})
	if err != nil {
		return err
	}
	return out.Close()
}

// render writes the jobs that pass the filter: JSON in job id order,
// tables in queue order (started jobs, then pending ones by priority as
// the scheduler's last pass ranked them, then held and ended ones).
func (q query) render(w io.Writer, jobs []api.Job, now time.Time) error {
	jobs = q.filter.Filter(jobs)
	if q.format == cli.FormatJSON {
		return cli.WriteJSON(w, cli.SortJobs(jobs)) // api.Job list, id order
	}
	if q.start {
		return cli.WriteQueueStart(w, jobs, now)
	}
	return cli.WriteJobColumns(w, cli.SortQueue(jobs), q.columns, now)
}

// watch redraws the queue after every change (blocking queries) until ctx
// ends. On a terminal it clears the screen and also redraws when a wait
// times out, so that TIME moves; elsewhere it appends one rendering per
// change.
func (q query) watch(ctx context.Context, c *client.Client, w io.Writer) error {
	tty := cli.IsTerminal(w)
	list, err := q.list(ctx, c, 0, 0)
	for first := true; ; first = false {
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		var b strings.Builder
		now := time.Now()
		switch {
		case tty:
			fmt.Fprintf(&b, "\x1b[H\x1b[2J%s  %s  (Ctrl-C to stop)\n\n", prog, now.Format(cli.TimeLayout))
		case !first && q.format == cli.FormatTable:
			b.WriteString("\n")
		}
		if err := q.render(&b, list.Jobs, now); err != nil {
			return err
		}
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
		for {
			if list.Index == 0 {
				// schedd gave no index to block on: poll.
				_ = backoff.Sleep(ctx, 2*time.Second)
			}
			var next api.JobList
			next, err = q.list(ctx, c, list.Index, blockWait)
			if ctx.Err() != nil || err != nil {
				break
			}
			changed := next.Index != list.Index || list.Index == 0
			list = next
			if changed || tty {
				break
			}
		}
	}
}
