// Command bhist shows ended jobs with their times, usage and timeline,
// as LSF's bhist and Slurm's sacct do.
package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

const prog = "bhist"

var command = cli.Command{
	Name:     prog,
	Synopsis: "[JOBID...]",
	Summary: "Show ended jobs, oldest end first: submit time, queue wait, run time, state, exit\n" +
		"code, CPU time, peak memory and nodes. By default your own jobs (-u all: every\n" +
		"user's); -a adds the unfinished ones (pending, running), after them, as LSF's\n" +
		"bhist -a shows jobs in every state; -l adds each job's timeline (submitted, started,\n" +
		"signalled, ended). Others' jobs come redacted.",
	Examples: []string{
		"bhist",
		"bhist -l 42                 # one job's summary and timeline",
		"bhist -u all -n 20          # everyone's last 20 jobs",
		"bhist -a -u all             # every user's jobs, ended and unfinished",
		"bhist -u alice -C 2026-11-01,2026-11-30",
		"bhist -S 2h                 # submitted in the last two hours",
		"bhist -o json | jq '.[].cpu_time'",
		"bhist -u all -p gpu -s FAILED,TIMEOUT --since 2026-11-01",
		"bhist -A physics --since 24h -o json",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	fs.OutputFlag()
	all := fs.Bool("a", false, "jobs in every state: the unfinished ones (pending, held, running) too, after the ended")
	fs.Bool("d", false, "ended jobs only (the default)")
	userName := fs.String("u", "", "show the jobs of `user` (\"all\": every user's)")
	last := fs.Int("n", 0, "show only the last `N` jobs to end (0: all)")
	filter := cli.EndedFilterFlags(fs)
	long := fs.Bool("l", false, "long form: each job's details and event timeline")
	pos, err := fs.Parse(args)
	if err != nil {
		return fs.Exit(err)
	}
	ids, err := cli.ParseJobRefs(pos)
	if err != nil {
		return fs.UsageError("%v", err)
	}
	if *last < 0 {
		return fs.UsageError("-n %d: want a number ≥ 0", *last)
	}
	if *long && fs.Format() == cli.FormatJSON {
		return fs.UsageError("-l is the long table; -o json already holds everything")
	}
	now := time.Now()
	q := url.Values{}
	switch {
	case *userName == "all" || len(ids) > 0:
	case *userName != "":
		q.Set("user", *userName)
	default:
		q.Set("user", cli.CurrentUser())
	}
	if err := filter.Query(q, now); err != nil {
		return fs.UsageError("%v", err)
	}
	for _, id := range ids {
		// An array's id picks its elements; "12[5]" one element, picked
		// by schedd (the store's index), not among all of them here.
		q.Add("id", id.String())
	}
	if *last > 0 && len(ids) == 0 {
		q.Set("limit", strconv.Itoa(*last))
	}
	c, err := fs.Client()
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	if len(ids) == 0 && (!*all || filter.EndedOnly()) && (*long || fs.Format() == cli.FormatJSON) {
		// Each record printed as it comes off the answer, never held
		// (the table needs every row first, for its columns' widths).
		if err := stream(ctx, c, q, stdout, *long, now.Location()); err != nil {
			return cli.Fail(stderr, prog, err)
		}
		return cli.ExitOK
	}
	h, err := c.History(ctx, q)
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	jobs, code := h.Jobs, cli.ExitOK
	if *all && !filter.EndedOnly() {
		live, err := unfinished(ctx, c, q, ids, now)
		if err != nil {
			return cli.Fail(stderr, prog, err)
		}
		jobs = append(jobs, live...)
	}
	if len(ids) > 0 {
		found := jobs
		jobs = nil
		for _, id := range ids {
			n := len(jobs)
			for _, j := range found {
				switch {
				case id.Element && j.ArrayID == id.ID && j.ArrayIndex == id.Index,
					!id.Element && (j.ID == id.ID || j.ArrayID == id.ID):
					jobs = append(jobs, j)
				}
			}
			if len(jobs) == n && *all {
				code = cli.Fail(stderr, prog, fmt.Errorf("job %s: unknown, or outside -S/-C", id))
			} else if len(jobs) == n {
				code = cli.Fail(stderr, prog, fmt.Errorf("job %s: no history: not ended, unknown, or outside -S/-C", id))
			}
		}
		if *last > 0 && len(jobs) > *last {
			jobs = jobs[len(jobs)-*last:]
		}
	}
	if jobs == nil {
		jobs = []api.HistoryJob{}
	}
	switch {
	case fs.Format() == cli.FormatJSON:
		err = cli.WriteJSON(stdout, jobs)
	case *long:
		err = cli.WriteHistoryLong(stdout, jobs, now.Location())
	default:
		err = cli.WriteHistory(stdout, jobs, now.Location())
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	return code
}

// stream writes the records the history query q picks as they come
// off schedd's answer: -o json as one list, byte for byte as WriteJSON
// writes it, or -l's long form. An error cut short leaves the output
// unfinished, and bhist fails.
func stream(ctx context.Context, c *client.Client, q url.Values, w io.Writer, long bool, loc *time.Location) error {
	if long {
		n := 0
		_, err := c.EachHistory(ctx, q, func(h api.HistoryJob) error {
			if n > 0 {
				if _, err := fmt.Fprintln(w); err != nil {
					return err
				}
			}
			n++
			return cli.WriteHistoryLong(w, []api.HistoryJob{h}, loc)
		})
		return err
	}
	out := cli.NewJSONList(w)
	if _, err := c.EachHistory(ctx, q, func(h api.HistoryJob) error { return out.Add(h) }); err != nil {
		return err
	}
	return out.Close()
}

// unfinished are the jobs still in schedd's queue and not ended that the
// history query q picks (its users and partitions; the named ids), as
// bhist shows jobs: waited and run so far, the timeline until now.
func unfinished(ctx context.Context, c *client.Client, q url.Values, ids []api.JobRef, now time.Time) ([]api.HistoryJob, error) {
	var live []api.Job
	if len(ids) > 0 {
		for _, id := range ids {
			j, _, err := c.JobRef(ctx, id, 0, 0)
			switch {
			case client.IsNotFound(err):
				continue
			case err != nil:
				return nil, err
			}
			live = append(live, j)
			if j.Array != nil {
				l, err := c.JobsWhere(ctx, url.Values{"array": {strconv.FormatUint(j.ID, 10)}, "ended": {"false"}}, 0, 0)
				if err != nil {
					return nil, err
				}
				live = append(live, l.Jobs...)
			}
		}
	} else {
		lq := url.Values{"ended": {"false"}, "user": q["user"], "partition": q["partition"]}
		l, err := c.JobsWhere(ctx, lq, 0, 0)
		if err != nil {
			return nil, err
		}
		live = l.Jobs
	}
	var out []api.HistoryJob
	for _, j := range live {
		if j.State.Terminal() || j.Array != nil || j.ID == 0 { // an array's row is its elements'
			continue
		}
		out = append(out, cli.HistoryFromJob(j, now))
	}
	return out, nil
}
