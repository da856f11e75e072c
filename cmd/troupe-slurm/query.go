package main

import (
	"context"
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
	"github.com/troupe-hpc/troupe/internal/client"
)

// list splits Slurm's comma-separated option values, each given option
// adding to the list.
func list(dst []string, v string) []string {
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			dst = append(dst, s)
		}
	}
	return dst
}

// jobIDs reads Slurm job ids ("12", "12,13"); an array element
// ("12_3") or a step ("12.0") names its job.
func jobIDs(vals []string) ([]uint64, error) {
	var ids []uint64
	for _, v := range vals {
		base, _, _ := strings.Cut(v, ".")
		base, _, _ = strings.Cut(base, "_")
		id, err := strconv.ParseUint(base, 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("invalid job id: %s", v)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// stateSet reads squeue -t and sacct -s: long or compact names, any
// case; "all" is nil (every state).
func stateSet(vals []string) (map[string]bool, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	long := map[string]string{}
	for _, s := range cli.SlurmStates() {
		long[s] = s
	}
	out := map[string]bool{}
	for _, v := range vals {
		u := strings.ToUpper(v)
		if u == "ALL" {
			return nil, nil
		}
		if _, ok := long[u]; !ok {
			return nil, fmt.Errorf("invalid job state specified: %s", v)
		}
		out[u] = true
	}
	// Each compact code stands for its long name and back.
	for _, s := range []string{"PENDING:PD", "CONFIGURING:CF", "RUNNING:R", "SUSPENDED:S", "COMPLETED:CD",
		"FAILED:F", "CANCELLED:CA", "TIMEOUT:TO", "NODE_FAIL:NF"} {
		l, c, _ := strings.Cut(s, ":")
		if out[l] || out[c] {
			out[l], out[c] = true, true
		}
	}
	return out, nil
}

// liveJobs are the jobs schedd holds that ids, users and partitions
// pick: each id asked for alone (what pollers such as snakemake's
// `sacct -j ID` need), else the list filtered by schedd.
func liveJobs(ctx context.Context, c *client.Client, ids []uint64, users, parts []string) ([]api.Job, error) {
	if len(ids) > 0 {
		var jobs []api.Job
		for _, id := range ids {
			j, _, err := c.Job(ctx, id, 0, 0)
			switch {
			case client.IsNotFound(err):
			case err != nil:
				return nil, err
			default:
				jobs = append(jobs, j)
			}
		}
		return jobs, nil
	}
	q := url.Values{}
	for _, u := range users {
		if u != "all" {
			q.Add("user", u)
		}
	}
	for _, p := range parts {
		q.Add("partition", p)
	}
	l, err := c.JobsWhere(ctx, q, 0, 0)
	return l.Jobs, err
}

var squeueOpts = []option{
	{'h', "noheader", false}, {'o', "format", true}, {'j', "jobs", true}, {'u', "user", true},
	{'p', "partition", true}, {'t', "states", true}, {'n', "name", true}, {'A', "account", true},
	{'a', "all", false}, {'l', "long", false}, {0, "me", false}, {0, "help", false}, {0, "usage", false},
	{'v', "verbose", false}, {'r', "array", false},
}

// squeue lists jobs as Slurm's squeue: by default every user's pending
// and running jobs; -j names jobs in any state still in the queue.
func squeue(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const prog = "squeue"
	opts, rest, err := getopt(args, squeueOpts, false, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nTry \"squeue --help\" for more information\n", prog, err)
		return 1
	}
	if len(rest) > 0 {
		return fail(stderr, prog, "Unrecognized option: %s", rest[0])
	}
	var (
		header                          = true
		format                          = cli.SqueueDefaultFormat
		jobs, users, parts, states, nms []string
		accounts                        []string
	)
	for _, o := range opts {
		switch o.name {
		case "noheader":
			header = false
		case "format":
			format = o.value
		case "long":
			format = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
		case "jobs":
			jobs = list(jobs, o.value)
		case "user":
			users = list(users, o.value)
		case "me":
			users = append(users, cli.CurrentUser())
		case "partition":
			parts = list(parts, o.value)
		case "states":
			states = list(states, o.value)
		case "name":
			nms = list(nms, o.value)
		case "account":
			accounts = list(accounts, o.value)
		case "help", "usage":
			return usage(stdout, prog, "[OPTIONS...]", []string{
				"-h, --noheader        no header line",
				"-o, --format=FORMAT   fields %i %A %t %T %j %u %P %a %M %l %D %C %N %r %R %Z %V %S, %[.][width]X",
				"-l, --long            the long format",
				"-j, --jobs=IDS        these jobs, in any state",
				"-u, --user=USERS      these users' jobs (--me: yours)",
				"-p, --partition=LIST  these partitions' jobs",
				"-t, --states=LIST     PENDING (PD), RUNNING (R), CONFIGURING (CF), SUSPENDED (S), COMPLETED (CD),\n" +
					"                        FAILED (F), CANCELLED (CA), TIMEOUT (TO), NODE_FAIL (NF), or all",
				"-n, --name=NAMES      jobs of these names",
				"-A, --account=LIST    jobs charged to these accounts",
			})
		}
	}
	f, err := cli.ParseSqueueFormat(format)
	if err != nil {
		return fail(stderr, prog, "-o: %v", err)
	}
	ids, err := jobIDs(jobs)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	want, err := stateSet(states)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	if len(states) == 0 && len(ids) == 0 {
		want = map[string]bool{"PENDING": true, "CONFIGURING": true, "RUNNING": true, "SUSPENDED": true}
	}
	c, err := newClient(prog, stderr)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	live, err := liveJobs(ctx, c, ids, users, parts)
	if err != nil {
		return fail(stderr, prog, "Unable to contact schedd: %v", err)
	}
	var out []api.Job
	for _, j := range cli.SortJobs(live) {
		if (len(ids) == 0 || slices.Contains(ids, j.ID)) &&
			(len(users) == 0 || slices.Contains(users, j.User)) &&
			(len(parts) == 0 || slices.Contains(parts, j.Partition)) &&
			(len(nms) == 0 || slices.Contains(nms, j.Name)) &&
			(len(accounts) == 0 || slices.Contains(accounts, cli.JobAccount(j))) &&
			(want == nil || want[cli.SlurmState(j)]) {
			out = append(out, j)
		}
	}
	if len(ids) == 1 && len(live) == 0 {
		// squeue -j of a job that left the queue.
		return fail(stderr, prog, "Invalid job id specified")
	}
	if err := cli.WriteSqueue(stdout, out, f, header, time.Now()); err != nil {
		return fail(stderr, prog, "%v", err)
	}
	return 0
}

var sacctOpts = []option{
	{'X', "allocations", false}, {'n', "noheader", false}, {'P', "parsable2", false}, {'p', "parsable", false},
	{'o', "format", true}, {'j', "jobs", true}, {0, "name", true}, {'u', "user", true}, {'a', "allusers", false},
	{'S', "starttime", true}, {'E', "endtime", true}, {'s', "state", true}, {'r', "partition", true},
	{'A', "accounts", true}, {'b', "brief", false}, {0, "delimiter", true}, {'h', "help", false},
	{0, "usage", false}, {'D', "duplicates", false}, {'v', "verbose", false}, {'L', "allclusters", false},
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
			})
		}
	}
	fields, err := cli.ParseSacctFormat(format)
	if err != nil {
		return fail(stderr, prog, "--format: %v", err)
	}
	ids, err := jobIDs(jobs)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
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
	for _, id := range ids {
		q.Add("id", strconv.FormatUint(id, 10))
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
	h, err := c.History(ctx, q)
	if err != nil {
		return fail(stderr, prog, "Problem talking to the database: %v", err)
	}
	live, err := liveJobs(ctx, c, ids, users, parts)
	if err != nil {
		return fail(stderr, prog, "Problem talking to schedd: %v", err)
	}
	seen := map[uint64]bool{}
	var rows []cli.SacctJob
	keep := func(s cli.SacctJob) {
		if seen[s.ID] {
			return
		}
		seen[s.ID] = true
		if (len(ids) == 0 || slices.Contains(ids, s.ID)) &&
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
	for _, j := range live {
		keep(cli.SacctFromJob(j))
	}
	for _, j := range h.Jobs {
		keep(cli.SacctFromHistory(j))
	}
	slices.SortFunc(rows, func(a, b cli.SacctJob) int {
		if c := a.Submitted.Compare(b.Submitted); c != 0 {
			return c
		}
		return int(a.ID) - int(b.ID)
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
	ids, err := jobIDs(rest)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	if len(ids) == 0 && len(names)+len(users)+len(parts)+len(states)+len(accounts) == 0 {
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
	targets := ids
	if len(names)+len(users)+len(parts)+len(states)+len(accounts) > 0 {
		l, err := c.Jobs(ctx, 0, 0)
		if err != nil {
			return fail(stderr, prog, "%v", err)
		}
		targets = nil
		for _, j := range l.Jobs {
			if !j.State.Terminal() &&
				(len(ids) == 0 || slices.Contains(ids, j.ID)) &&
				(len(names) == 0 || slices.Contains(names, j.Name)) &&
				(len(users) == 0 || slices.Contains(users, j.User)) &&
				(len(parts) == 0 || slices.Contains(parts, j.Partition)) &&
				(len(accounts) == 0 || slices.Contains(accounts, cli.JobAccount(j))) &&
				(want == nil || want[cli.SlurmState(j)]) {
				targets = append(targets, j.ID)
			}
		}
	}
	code := 0
	for _, id := range targets {
		var j api.Job
		if signal != "" {
			req := api.SignalJob{Signal: signal}
			if batch {
				req.Host = "main1"
			}
			j, err = c.Signal(ctx, id, req)
		} else {
			j, err = c.Kill(ctx, id)
		}
		switch {
		case err != nil && strings.Contains(err.Error(), "not found"):
			fmt.Fprintf(stderr, "%s: error: Kill job error on job id %d: Invalid job id specified\n", prog, id)
			code = 1
		case err != nil:
			fmt.Fprintf(stderr, "%s: error: Kill job error on job id %d: %v\n", prog, id, err)
			code = 1
		case signal == "" && j.State.Terminal() && j.State != api.JobCancelled && !quiet:
			fmt.Fprintf(stderr, "%s: error: Kill job error on job id %d: Job/step already completing or completed\n", prog, id)
		}
	}
	return code
}

var sinfoOpts = []option{
	{'h', "noheader", false}, {'o', "format", true}, {'N', "Node", false}, {'p', "partition", true},
	{'a', "all", false}, {'l', "long", false}, {'v', "verbose", false}, {0, "help", false}, {0, "usage", false},
	{'s', "summarize", false},
}

// sinfo shows the partitions and their nodes as Slurm's sinfo: one line
// per partition and node state, the default partition's name starred.
func sinfo(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const prog = "sinfo"
	opts, rest, err := getopt(args, sinfoOpts, false, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nTry \"sinfo --help\" for more information\n", prog, err)
		return 1
	}
	if len(rest) > 0 {
		return fail(stderr, prog, "Unrecognized option: %s", rest[0])
	}
	var (
		header      = true
		format      string
		byNode      bool
		partsWanted []string
	)
	for _, o := range opts {
		switch o.name {
		case "noheader":
			header = false
		case "format":
			format = o.value
		case "Node":
			byNode = true
		case "partition":
			partsWanted = list(partsWanted, o.value)
		case "summarize":
			format = "%#P %.5a %.10l %.6D %N"
		case "help", "usage":
			return usage(stdout, prog, "[OPTIONS...]", []string{
				"-h, --noheader        no header",
				"-o, --format=FORMAT   fields %P (default starred) %R %a %l %D %t %T %N, %[.][width|#]X",
				"-N, --Node            one line per node",
				"-p, --partition=LIST  these partitions",
			})
		}
	}
	if format == "" {
		format = cli.SinfoDefaultFormat
		if byNode {
			format = cli.SinfoNodeFormat
		}
	}
	c, err := newClient(prog, stderr)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	parts, err := c.Partitions(ctx)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	var ps []api.PartitionInfo
	for _, p := range parts.Partitions {
		if len(partsWanted) == 0 || slices.Contains(partsWanted, p.Name) {
			ps = append(ps, p)
		}
	}
	if err := cli.WriteSinfo(stdout, cli.SinfoRows(ps, nodes.Nodes, byNode), format, header); err != nil {
		return fail(stderr, prog, "%v", err)
	}
	return 0
}
