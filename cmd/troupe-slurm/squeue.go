package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
)

var squeueOpts = []option{
	{'h', "noheader", false}, {'o', "format", true}, {'j', "jobs", true}, {'u', "user", true},
	{'p', "partition", true}, {'t', "states", true}, {'n', "name", true}, {'A', "account", true},
	{'a', "all", false}, {'l', "long", false}, {0, "me", false}, {0, "help", false}, {0, "usage", false},
	{'v', "verbose", false}, {'r', "array", false}, {'O', "Format", true}, {0, "noconvert", false},
	{'M', "clusters", true}, {'S', "sort", true}, {0, "only-job-state", false},
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
		long                            string // -O
		noconvert                       bool
		oneElement                      bool // -r: one array element a line
		jobs, users, parts, states, nms []string
		accounts                        []string
	)
	for _, o := range opts {
		switch o.name {
		case "noheader":
			header = false
		case "format":
			format, long = o.value, ""
		case "Format":
			long = o.value
		case "noconvert":
			noconvert = true
		case "array":
			oneElement = true
		case "clusters", "sort", "only-job-state":
			// One cluster: -M names it (or all); the order is squeue's
			// own; every field is at hand (Slurm 24.05's --only-job-state
			// asks for a cheaper query, which troupe needs not).
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
				"-o, --format=FORMAT   fields %i %A %F %K %t %T %j %u %P %a %M %l %D %C %N %r %R %Z %V %S, %[.][width]X",
				"-O, --Format=FIELDS   fields by name, each FIELD[:[.][SIZE][SUFFIX]]: JobID, State, StateCompact, Name,\n" +
					"                        UserName, Partition, Account, TimeUsed, TimeLimit, NumNodes, NumCPUs, NodeList,\n" +
					"                        Reason, WorkDir, SubmitTime, StartTime, EndTime, ArrayJobID, ArrayTaskID, ...",
				"    --noconvert       memory sizes in megabytes, unconverted",
				"-M, --clusters=NAME   accepted: troupe is one cluster",
				"-l, --long            the long format",
				"-j, --jobs=IDS        these jobs, in any state",
				"-u, --user=USERS      these users' jobs (--me: yours)",
				"-p, --partition=LIST  these partitions' jobs",
				"-t, --states=LIST     PENDING (PD), RUNNING (R), CONFIGURING (CF), SUSPENDED (S), COMPLETED (CD),\n" +
					"                        FAILED (F), CANCELLED (CA), TIMEOUT (TO), NODE_FAIL (NF),\n" +
					"                        PREEMPTED (PR), or all",
				"-n, --name=NAMES      jobs of these names",
				"-A, --account=LIST    jobs charged to these accounts",
			})
		}
	}
	f, err := cli.ParseSqueueFormat(format)
	if err != nil {
		return fail(stderr, prog, "-o: %v", err)
	}
	if long != "" {
		if f, err = cli.ParseSqueueLongFormat(long, noconvert); err != nil {
			return fail(stderr, prog, "%v", err)
		}
	}
	sels, err := jobSels(jobs)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	ids := selIDs(sels)
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
	live, err := liveJobs(ctx, c, sels, users, parts)
	if err != nil {
		return fail(stderr, prog, "Unable to contact schedd: %v", err)
	}
	var out []api.Job
	shown := cli.SlurmArrays(cli.SortJobs(live))
	if oneElement {
		shown = cli.SlurmArrayElements(shown)
	}
	for _, j := range shown {
		if anySel(sels, j.ID, j.ArrayID, j.ArrayIndex) &&
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
