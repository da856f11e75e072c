package main

import (
	"cmp"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
)

var sacctOpts = []option{
	{'X', "allocations", false}, {'n', "noheader", false}, {'P', "parsable2", false}, {'p', "parsable", false},
	{'o', "format", true}, {'j', "jobs", true}, {0, "name", true}, {'u', "user", true}, {'a', "allusers", false},
	{'S', "starttime", true}, {'E', "endtime", true}, {'s', "state", true}, {'r', "partition", true},
	{'A', "accounts", true}, {'b', "brief", false}, {0, "delimiter", true}, {'h', "help", false},
	{0, "usage", false}, {'D', "duplicates", false}, {'v', "verbose", false}, {'L', "allclusters", false},
	{'M', "clusters", true}, {0, "units", true}, {0, "noconvert", false}, {'T', "truncate", false},
}

// sacct shows jobs as Slurm's sacct: those still in schedd's queue (any
// state) and the ended ones in the accounting store, each once. By
// default: your jobs since midnight (any time with -j).
func sacct(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const prog = "sacct"
	opts, rest, err := getopt(args, sacctOpts, false, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nTry \"sacct --help\" for more information\n", prog, err)
		return 1
	}
	if len(rest) > 0 {
		return fail(stderr, prog, "Unknown arguments: %s", strings.Join(rest, " "))
	}
	var (
		header                  = true
		mode                    = cli.SacctTable
		format                  = os.Getenv("SACCT_FORMAT")
		jobs, names, users, sts []string
		parts, accounts         []string
		all                     bool
		start, end              string
		delimiter               = "|"
		duplicates              bool
	)
	if format == "" {
		format = cli.SacctDefaultFormat
	}
	for _, o := range opts {
		switch o.name {
		case "noheader":
			header = false
		case "parsable2":
			mode = cli.SacctParsable2
		case "parsable":
			mode = cli.SacctParsable
		case "format":
			format = o.value
		case "brief":
			format = "JobID,State,ExitCode"
		case "jobs":
			jobs = list(jobs, o.value)
		case "name":
			names = list(names, o.value)
		case "user":
			users = list(users, o.value)
		case "allusers":
			all = true
		case "starttime":
			start = o.value
		case "endtime":
			end = o.value
		case "state":
			sts = list(sts, o.value)
		case "partition":
			parts = list(parts, o.value)
		case "accounts":
			accounts = list(accounts, o.value)
		case "delimiter":
			delimiter = o.value
		case "duplicates":
			duplicates = true
		case "clusters", "allclusters", "truncate":
			// troupe is one cluster: -M all, -M NAME and -L pick it.
		case "units", "noconvert":
			// Memory sizes are written as Slurm writes them unconverted.
		case "help", "usage":
			return usage(stdout, prog, "[OPTIONS...]", []string{
				"-X, --allocations     the jobs (troupe has no steps: always)",
				"-n, --noheader        no header",
				"-P, --parsable2       '|' between fields; -p: after each",
				"-o, --format=FIELDS   " + strings.Join(cli.SacctFieldNames(), ","),
				"                      each with an optional %WIDTH; default $SACCT_FORMAT, else " + cli.SacctDefaultFormat,
				"-b, --brief           JobID,State,ExitCode",
				"-j, --jobs=IDS        these jobs (any time)",
				"    --name=NAMES      jobs of these names",
				"-u, --user=USERS      these users' jobs (default: yours); -a: everyone's",
				"-S, --starttime=TIME  jobs not ended before TIME (default: midnight; with -j: any)",
				"-E, --endtime=TIME    jobs submitted before TIME (default: now)",
				"-s, --state=LIST      jobs in these states (long or compact names)",
				"-r, --partition=LIST  jobs of these partitions; -A, --accounts=LIST: charged to these accounts",
				"-D, --duplicates      every run of a requeued job (earlier runs REQUEUED), not only the last",
				"-M, --clusters=LIST   accepted (all, or any name): troupe is one cluster; so are -L, --units, --noconvert",
			})
		}
	}
	fields, err := cli.ParseSacctFormat(format)
	if err != nil {
		return fail(stderr, prog, "--format: %v", err)
	}
	sels, err := jobSels(jobs)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	ids := selIDs(sels)
	want, err := stateSet(sts)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	now := time.Now()
	var from, to time.Time
	switch {
	case start != "":
		if from, err = slurmTime(start, now); err != nil {
			return fail(stderr, prog, "-S %s: %v", start, err)
		}
	case len(ids) == 0:
		from = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	}
	if end != "" {
		if to, err = slurmTime(end, now); err != nil {
			return fail(stderr, prog, "-E %s: %v", end, err)
		}
	}
	if !all && len(users) == 0 && len(ids) == 0 {
		users = []string{cli.CurrentUser()}
	}
	c, err := newClient(prog, stderr)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	// The accounting store: ended jobs, filtered by schedd.
	q := url.Values{}
	for _, u := range users {
		q.Add("user", u)
	}
	for _, s := range sels {
		// One element is picked by schedd (12[5]: the store's index),
		// not among all of its array's elements here.
		ref := api.JobRef{ID: s.id, Index: s.index, Element: s.element}
		if !slices.Contains(q["id"], ref.String()) {
			q.Add("id", ref.String())
		}
	}
	for _, p := range parts {
		q.Add("partition", p)
	}
	for _, a := range accounts {
		q.Add("account", a)
	}
	if !from.IsZero() {
		q.Set("ended_from", from.UTC().Format(time.RFC3339))
	}
	if !to.IsZero() {
		q.Set("submitted_to", to.UTC().Format(time.RFC3339))
	}
	// The store's records and the queue's jobs are asked for at once:
	// a poller's sacct -j waits for the slower, not for both.
	var h api.History
	var herr error
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		h, herr = c.History(ctx, q)
	}()
	live, err := liveJobs(ctx, c, sels, users, parts)
	<-asked
	if herr != nil {
		return fail(stderr, prog, "Problem talking to the database: %v", herr)
	}
	if err != nil {
		return fail(stderr, prog, "Problem talking to schedd: %v", err)
	}
	// Each run once: the live job is its last run; without -D only the
	// last run of each job shows, as Slurm's sacct does.
	type runKey struct {
		id  uint64
		run int
	}
	seen := map[runKey]bool{}
	last := map[uint64]int{}
	for _, j := range live {
		last[j.ID] = max(last[j.ID], j.Requeues)
	}
	for _, j := range h.Jobs {
		last[j.ID] = max(last[j.ID], j.Requeues)
	}
	var rows []cli.SacctJob
	keep := func(s cli.SacctJob) {
		k := runKey{s.ID, s.Run}
		if seen[k] || (!duplicates && s.Run != last[s.ID]) {
			return
		}
		seen[k] = true
		if anySel(sels, s.ID, s.ArrayID, s.Index) &&
			(len(users) == 0 || slices.Contains(users, s.User)) &&
			(len(names) == 0 || slices.Contains(names, s.Name)) &&
			(len(parts) == 0 || slices.Contains(parts, s.Partition)) &&
			(len(accounts) == 0 || slices.Contains(accounts, s.Account)) &&
			(want == nil || want[s.State]) &&
			(from.IsZero() || s.Ended.IsZero() || !s.Ended.Before(from)) &&
			(to.IsZero() || s.Submitted.Before(to)) {
			rows = append(rows, s)
		}
	}
	for _, j := range cli.SlurmArrays(live) {
		keep(cli.SacctFromJob(j))
	}
	for _, j := range h.Jobs {
		keep(cli.SacctFromHistory(j))
	}
	slices.SortFunc(rows, func(a, b cli.SacctJob) int {
		if c := a.Submitted.Compare(b.Submitted); c != 0 {
			return c
		}
		if c := cmp.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return cmp.Compare(a.Run, b.Run)
	})
	var b strings.Builder
	if err := cli.WriteSacct(&b, rows, fields, mode, header, now); err != nil {
		return fail(stderr, prog, "%v", err)
	}
	text := b.String()
	if mode != cli.SacctTable && delimiter != "|" {
		text = strings.ReplaceAll(text, "|", delimiter)
	}
	fmt.Fprint(stdout, text)
	return 0
}

// slurmTime reads sacct's -S and -E: Slurm's forms YYYY-MM-DD[THH:MM[:SS]],
// MM/DD[/YY], HH:MM[:SS] (today), now[-N[minutes|hours|days]], today,
// midnight, noon; and troupe's (a duration ago, such as 2h).
func slurmTime(s string, now time.Time) (time.Time, error) {
	ls := strings.ToLower(s)
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	switch ls {
	case "now":
		return now, nil
	case "today", "midnight":
		return day, nil
	case "noon":
		return day.Add(12 * time.Hour), nil
	case "tomorrow":
		return day.AddDate(0, 0, 1), nil
	}
	if rest, ok := strings.CutPrefix(ls, "now"); ok && len(rest) > 1 && (rest[0] == '-' || rest[0] == '+') {
		n, unit := rest[1:], time.Second
		for _, u := range []struct {
			suffix string
			d      time.Duration
		}{{"minutes", time.Minute}, {"hours", time.Hour}, {"days", 24 * time.Hour}, {"weeks", 7 * 24 * time.Hour}, {"seconds", time.Second}} {
			for i := 1; i <= len(u.suffix); i++ {
				if t, ok := strings.CutSuffix(n, u.suffix[:i]); ok && t != "" && strings.Trim(t, "0123456789") == "" {
					n, unit = t, u.d
					break
				}
			}
		}
		k, err := strconv.Atoi(n)
		if err != nil {
			return time.Time{}, fmt.Errorf("want now[+-count[seconds|minutes|hours|days|weeks]]")
		}
		if rest[0] == '-' {
			k = -k
		}
		return now.Add(time.Duration(k) * unit), nil
	}
	for _, layout := range []string{"15:04:05", "15:04"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return day.Add(time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second), nil
		}
	}
	for _, layout := range []string{"01/02/06", "01/02"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			if layout == "01/02" {
				t = t.AddDate(now.Year(), 0, 0)
			}
			return t, nil
		}
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	return cli.ParseTime(s, now)
}
