// Command bhist shows ended jobs with their times, usage and timeline,
// as LSF's bhist and Slurm's sacct do.
package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
)

const prog = "bhist"

var command = cli.Command{
	Name:     prog,
	Synopsis: "[JOBID...]",
	Summary: "Show ended jobs, oldest end first: submit time, queue wait, run time, state, exit\n" +
		"code, CPU time, peak memory and nodes. By default your own jobs; -l adds each job's\n" +
		"timeline (submitted, started, signalled, ended). Others' jobs come redacted.",
	Examples: []string{
		"bhist",
		"bhist -l 42                 # one job's summary and timeline",
		"bhist -a -n 20              # everyone's last 20 jobs",
		"bhist -u alice -C 2026-11-01,2026-11-30",
		"bhist -S 2h                 # submitted in the last two hours",
		"bhist -o json | jq '.[].cpu_time'",
		"bhist -a -p gpu -s FAILED,TIMEOUT --since 2026-11-01",
		"bhist -A physics --since 24h -o json",
	},
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(command, stdout, stderr)
	fs.OutputFlag()
	all := fs.Bool("a", false, "show every user's jobs")
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
	case *all && *userName != "":
		return fs.UsageError("-a shows every user's jobs; -u picks one user: give one of them")
	case *userName == "all" || *all || len(ids) > 0:
	case *userName != "":
		q.Set("user", *userName)
	default:
		q.Set("user", cli.CurrentUser())
	}
	if err := filter.Query(q, now); err != nil {
		return fs.UsageError("%v", err)
	}
	for _, id := range ids {
		q.Add("id", strconv.FormatUint(id.ID, 10)) // an array's id picks its elements
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
	h, err := c.History(ctx, q)
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	jobs, code := h.Jobs, cli.ExitOK
	if len(ids) > 0 {
		jobs = nil
		for _, id := range ids {
			n := len(jobs)
			for _, j := range h.Jobs {
				switch {
				case id.Element && j.ArrayID == id.ID && j.ArrayIndex == id.Index,
					!id.Element && (j.ID == id.ID || j.ArrayID == id.ID):
					jobs = append(jobs, j)
				}
			}
			if len(jobs) == n {
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
