package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/client"
)

var scontrolOpts = []option{
	{'o', "oneliner", false}, {'d', "details", false}, {'M', "clusters", true}, {'h', "help", false},
	{0, "usage", false}, {'Q', "quiet", false}, {'v', "verbose", false}, {'a', "all", false},
}

// scontrol is Slurm's scontrol, the parts a job's user, an admin and a
// workflow tool need: show job|node|partition|config (-o: one line
// each), hold and release of pending jobs, and an admin's suspend and
// resume of running ones (gang suspend: every container frozen).
func scontrol(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const prog = "scontrol"
	opts, rest, err := getopt(args, scontrolOpts, false, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nTry \"scontrol --help\" for more information\n", prog, err)
		return 1
	}
	one := false
	for _, o := range opts {
		switch o.name {
		case "oneliner":
			one = true
		case "help", "usage":
			return usage(stdout, prog, "[-o] COMMAND", []string{
				"show job [ID]          jobs, as Slurm writes them (-o: one line each)",
				"show node [NAME]       nodes",
				"show partition [NAME]  partitions",
				"show reservation [NAME] reservations (badmin reservation makes them)",
				"show licenses [NAME]   licenses and their use",
				"show config            the settings workflow tools read",
				"hold ID...             hold pending jobs (release: let them go)",
				"suspend ID...          admins: freeze every container of running jobs, lending their",
				"                       CPUs and GPUs to other jobs (resume: thaw them once free)",
				"-M, --clusters=NAME    accepted: troupe is one cluster",
			})
		}
	}
	if len(rest) == 0 {
		return fail(stderr, prog, "no command given; troupe's scontrol knows show, hold, release, suspend, resume")
	}
	verb := strings.ToLower(rest[0])
	c, err := newClient(prog, stderr)
	if err != nil {
		return fail(stderr, prog, "%v", err)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	switch verb {
	case "show":
		if len(rest) < 2 {
			return fail(stderr, prog, "show: say what: job, node, partition, reservation, licenses or config")
		}
		return scontrolShow(ctx, c, strings.ToLower(rest[1]), rest[2:], one, stdout, stderr)
	case "hold", "uhold", "release", "suspend", "resume":
		if len(rest) < 2 {
			return fail(stderr, prog, "%s: name a job", verb)
		}
		return scontrolJobs(ctx, c, verb, rest[1:], stderr)
	}
	return fail(stderr, prog, "invalid keyword: %s; troupe's scontrol knows show, hold, release, suspend, resume", rest[0])
}

// scontrolJobs holds, releases, suspends or resumes the jobs ids names
// ("12", "12,13", "12_3"; a job array's id is the whole array).
func scontrolJobs(ctx context.Context, c *client.Client, verb string, ids []string, stderr io.Writer) int {
	code := 0
	for _, arg := range ids {
		for v := range strings.SplitSeq(arg, ",") {
			sels, err := jobSels([]string{v})
			if err != nil {
				fmt.Fprintf(stderr, "Invalid job id specified for job %s\n", v)
				code = 1
				continue
			}
			ref := api.JobRef{ID: sels[0].id, Index: sels[0].index, Element: sels[0].element}
			switch verb {
			case "hold", "uhold":
				_, err = c.Control(ctx, ref, "hold", nil)
			case "release":
				_, err = c.Control(ctx, ref, "release", nil)
			case "suspend":
				_, err = c.Control(ctx, ref, "suspend", nil)
			case "resume":
				err = resumeJob(ctx, c, ref)
			}
			if err != nil {
				if client.IsNotFound(err) {
					fmt.Fprintf(stderr, "Invalid job id specified for job %s\n", v)
				} else {
					fmt.Fprintf(stderr, "%s: error: job %s: %v\n", "scontrol", v, err)
				}
				code = 1
			}
		}
	}
	return code
}

// resumeJob resumes a suspended job (its containers thaw once its CPUs
// and GPUs are free), or sends SIGCONT to one stopped by SIGSTOP (bstop,
// bkill -s STOP), which scontrol resume undoes as well.
func resumeJob(ctx context.Context, c *client.Client, ref api.JobRef) error {
	j, _, err := c.JobRef(ctx, ref, 0, 0)
	if err != nil {
		return err
	}
	if j.Suspended == nil && cli.Stopped(j) {
		_, err = c.SignalRef(ctx, ref, api.SignalJob{Signal: "CONT"})
		return err
	}
	_, err = c.Control(ctx, ref, "resume", nil)
	return err
}

// kv is one Key=Value of scontrol show; a new line starts before a
// key marked nl (in the multi-line form).
type kv struct {
	key, value string
	nl         bool
}

// showNamed is scontrol show node and show partition: the record of
// each item names picks (every item when names is empty); when names
// picks none, Slurm's "KIND NAME not found" and exit status 1.
func showNamed[T any](stdout, stderr io.Writer, kind string, items []T, name func(T) string, record func(T) []kv, names []string, one bool) int {
	shown := 0
	for _, it := range items {
		if len(names) == 0 || slices.Contains(names, name(it)) {
			writeRecord(stdout, record(it), one)
			shown++
		}
	}
	if shown == 0 && len(names) > 0 {
		fmt.Fprintf(stderr, "%s %s not found\n", kind, names[0])
		return 1
	}
	return 0
}

// writeRecord writes one record as scontrol does: Key=Value pairs, the
// lines after the first indented three spaces; one line with -o. An
// empty value is written "(null)" with -o, so that every pair on the line
// has one.
func writeRecord(w io.Writer, rec []kv, one bool) {
	var b strings.Builder
	for i, p := range rec {
		v := p.value
		if one && v == "" {
			v = "(null)"
		}
		switch {
		case i == 0:
		case one:
			b.WriteByte(' ')
		case p.nl:
			b.WriteString("\n   ")
		default:
			b.WriteByte(' ')
		}
		b.WriteString(p.key + "=" + strings.ReplaceAll(v, "\n", " "))
	}
	b.WriteByte('\n')
	if !one {
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

func scontrolShow(ctx context.Context, c *client.Client, what string, names []string, one bool, stdout, stderr io.Writer) int {
	const prog = "scontrol"
	switch {
	case strings.HasPrefix("jobs", what) && what != "":
		var sels []jobSel
		if len(names) > 0 {
			var err error
			if sels, err = jobSels(list(nil, strings.Join(names, ","))); err != nil {
				return fail(stderr, prog, "%v", err)
			}
		}
		live, err := liveJobs(ctx, c, sels, nil, nil)
		if err != nil {
			return fail(stderr, prog, "slurm_load_jobs error: %v", err)
		}
		var shown int
		now := time.Now()
		for _, j := range cli.SlurmArrays(cli.SortJobs(live)) {
			if !anySel(sels, j.ID, j.ArrayID, j.ArrayIndex) {
				continue
			}
			writeRecord(stdout, jobRecord(j, now), one)
			shown++
		}
		if shown == 0 {
			if len(sels) > 0 {
				fmt.Fprintln(stderr, "slurm_load_jobs error: Invalid job id specified")
				return 1
			}
			fmt.Fprintln(stdout, "No jobs in the system")
		}
		return 0
	case strings.HasPrefix("nodes", what) && what != "":
		l, err := c.Nodes(ctx)
		if err != nil {
			return fail(stderr, prog, "slurm_load_node error: %v", err)
		}
		return showNamed(stdout, stderr, "Node", l.Nodes, func(n api.Node) string { return n.Name }, nodeRecord, names, one)
	case (strings.HasPrefix("partitions", what) && len(what) >= 4) || what == "part":
		l, err := c.Partitions(ctx)
		if err != nil {
			return fail(stderr, prog, "slurm_load_partitions error: %v", err)
		}
		return showNamed(stdout, stderr, "Partition", l.Partitions, func(p api.PartitionInfo) string { return p.Name }, partitionRecord, names, one)
	case (strings.HasPrefix("reservations", what) && len(what) >= 3) || what == "res":
		l, err := c.Reservations(ctx)
		if err != nil {
			return fail(stderr, prog, "slurm_load_reservations error: %v", err)
		}
		rs := l.Reservations
		if len(names) > 0 {
			rs = slices.DeleteFunc(rs, func(r api.Reservation) bool { return !slices.Contains(names, r.Name) })
			if len(rs) == 0 {
				fmt.Fprintf(stderr, "Reservation %s not found\n", names[0])
				return 1
			}
		}
		if err := cli.WriteReservationsSlurm(stdout, rs, one); err != nil {
			return fail(stderr, prog, "%v", err)
		}
		return 0
	case strings.HasPrefix("licenses", what) && len(what) >= 3:
		return scontrolShowLicenses(ctx, c, names, one, stdout, stderr)
	case strings.HasPrefix("config", what) && what != "":
		// The settings tools read: MinJobAge (how long an ended job
		// stays in squeue: schedd's default keep_ended, 5 minutes, after
		// which it is purged to the accounting store, where sacct still
		// finds it), the cluster's name (as lsid and sacct -M give it).
		fmt.Fprintf(stdout, "Configuration data as of %s\n", time.Now().Format("2006-01-02T15:04:05"))
		for _, p := range [][2]string{
			{"AccountingStorageType", "accounting_storage/troupe"},
			{"ClusterName", cli.ClusterName()},
			{"MinJobAge", "300 sec"},
			{"SLURM_VERSION", "22.05"},
			{"SchedulerType", "sched/troupe"},
		} {
			fmt.Fprintf(stdout, "%-23s = %s\n", p[0], p[1])
		}
		return 0
	}
	return fail(stderr, prog, "invalid entity: %s for keyword: show; troupe's scontrol shows job, node, partition, reservation, licenses and config", what)
}

// nameID is Slurm's "name(id)" of a user or group.
func nameID(name string, id int) string { return fmt.Sprintf("%s(%d)", name, id) }

func groupName(gid int) string {
	if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
		return g.Name
	}
	return strconv.Itoa(gid)
}

func slurmTimeOr(t time.Time, none string) string {
	if t.IsZero() {
		return none
	}
	return t.Local().Format("2006-01-02T15:04:05")
}

// jobRecord is scontrol show job's record of j.
func jobRecord(j api.Job, now time.Time) []kv {
	rec := []kv{{key: "JobId", value: strconv.FormatUint(j.ID, 10)}}
	switch {
	case j.ArrayID != 0:
		rec = append(rec, kv{key: "ArrayJobId", value: strconv.FormatUint(j.ArrayID, 10)},
			kv{key: "ArrayTaskId", value: strconv.Itoa(j.ArrayIndex)})
	case j.Array != nil:
		rec = append(rec, kv{key: "ArrayJobId", value: strconv.FormatUint(j.ID, 10)},
			kv{key: "ArrayTaskId", value: cli.UnmadeIndices(j.Array).String()})
		if j.Array.MaxRunning > 0 {
			rec = append(rec, kv{key: "ArrayTaskThrottle", value: strconv.Itoa(j.Array.MaxRunning)})
		}
	}
	state := cli.SlurmState(j)
	runTime := time.Duration(0)
	if !j.Started.IsZero() {
		runTime = cli.JobTime(j, now)
	}
	end := "Unknown"
	switch {
	case !j.Ended.IsZero():
		end = slurmTimeOr(j.Ended, "Unknown")
	case j.Suspended != nil:
		// Its time limit stops while it is suspended: the end is not known.
	case !j.Started.IsZero() && j.Walltime > 0:
		end = slurmTimeOr(api.Stopping(j.Started, j.Walltime, j.SuspendedFor, nil), "Unknown")
	}
	nodes := cli.JobNodes(j)
	batchHost := ""
	if len(nodes) > 0 {
		batchHost = nodes[0]
	}
	cpus := 0.0
	for _, c := range j.Containers {
		cpus += c.Resources.CPU
	}
	size := max(cli.JobSize(j), 1)
	if cpus == 0 {
		cpus = j.Spec.Resources.CPU * float64(size)
	}
	out, _ := j.Spec.OutputPath(j.OutputVars("main1"))
	errPath, _ := j.Spec.ErrorPath(j.OutputVars("main1"))
	if errPath == "" {
		errPath = out
	}
	command := strings.Join(j.Spec.Command, " ")
	reason := cli.SlurmReason(j)
	rec = append(rec,
		kv{key: "JobName", value: j.Name},
		kv{key: "UserId", value: nameID(j.User, j.UID), nl: true},
		kv{key: "GroupId", value: nameID(groupName(j.GID), j.GID)},
		kv{key: "MCS_label", value: "N/A"},
		kv{key: "Priority", value: strconv.FormatInt(int64(math.Round(j.Priority)), 10), nl: true},
		kv{key: "Nice", value: strconv.Itoa(-j.Spec.Priority)},
		kv{key: "Account", value: cli.JobAccount(j)},
		kv{key: "QOS", value: "normal"},
		kv{key: "JobState", value: state, nl: true},
		kv{key: "Reason", value: reason},
		kv{key: "Dependency", value: cli.SlurmDependency(j.DependsOn)},
		kv{key: "Requeue", value: "1", nl: true},
		kv{key: "Restarts", value: strconv.Itoa(j.Requeues)},
		kv{key: "BatchFlag", value: "1"},
		kv{key: "Reboot", value: "0"},
		kv{key: "ExitCode", value: cli.SlurmExitCode(j.ExitCode)},
		kv{key: "RunTime", value: cli.SlurmElapsed(runTime), nl: true},
		kv{key: "TimeLimit", value: cli.SlurmTimeLimit(j.Walltime, "UNLIMITED")},
		kv{key: "TimeMin", value: "N/A"},
		kv{key: "SubmitTime", value: slurmTimeOr(j.Submitted, "Unknown"), nl: true},
		kv{key: "EligibleTime", value: slurmTimeOr(j.Submitted, "Unknown")},
		kv{key: "StartTime", value: slurmTimeOr(j.Started, "Unknown"), nl: true},
		kv{key: "EndTime", value: end},
		kv{key: "Deadline", value: "N/A"},
		kv{key: "Partition", value: j.Partition, nl: true},
		kv{key: "ReqNodeList", value: "(null)", nl: true},
		kv{key: "ExcNodeList", value: "(null)"},
		kv{key: "NodeList", value: orNull(cli.SlurmHostlist(nodes)), nl: true},
		kv{key: "BatchHost", value: orNull(batchHost), nl: true},
		kv{key: "NumNodes", value: strconv.Itoa(max(len(nodes), 1)), nl: true},
		kv{key: "NumCPUs", value: strconv.Itoa(int(math.Ceil(cpus)))},
		kv{key: "NumTasks", value: strconv.Itoa(size)},
		kv{key: "CPUs/Task", value: strconv.Itoa(max(int(math.Ceil(j.Spec.Resources.CPU)), 1))},
		kv{key: "MinMemoryNode", value: strconv.FormatInt(j.Spec.Resources.Memory>>20, 10) + "M", nl: true},
		kv{key: "MinTmpDiskNode", value: "0"},
		kv{key: "Features", value: "(null)", nl: true},
		kv{key: "OverSubscribe", value: "OK", nl: true},
		kv{key: "Contiguous", value: "0"},
		kv{key: "Licenses", value: orNull(cli.Licenses(j.Licenses))},
		kv{key: "Network", value: "(null)"},
		kv{key: "Command", value: orNull(command), nl: true},
		kv{key: "WorkDir", value: j.Cwd, nl: true},
		kv{key: "StdErr", value: errPath, nl: true},
		kv{key: "StdIn", value: "/dev/null", nl: true},
		kv{key: "StdOut", value: out, nl: true},
	)
	return rec
}

func orNull(s string) string {
	if s == "" {
		return "(null)"
	}
	return s
}

// slurmNodeState is a node's state as scontrol show node writes it.
func slurmNodeState(n api.Node) string {
	switch cli.SinfoNodeState(n) {
	case "down*":
		return "DOWN+NOT_RESPONDING"
	case "drain":
		return "IDLE+DRAIN"
	case "drng":
		return "MIXED+DRAIN"
	case "alloc":
		return "ALLOCATED"
	case "mix":
		return "MIXED"
	}
	return "IDLE"
}

// nodeRecord is scontrol show node's record of n.
func nodeRecord(n api.Node) []kv {
	cpus := n.Capacity.CPUMilli / 1000
	alloc := (n.Allocated.CPUMilli + 999) / 1000
	mem := n.Capacity.Memory >> 20
	tres := fmt.Sprintf("cpu=%d,mem=%dM,billing=%d", cpus, mem, cpus)
	gres := "(null)"
	if g := int(n.Capacity.GPU); g > 0 {
		tres += fmt.Sprintf(",gres/gpu=%d", g)
		gres = fmt.Sprintf("gpu:%d", g)
	}
	allocTRES := ""
	if n.Allocated.CPUMilli > 0 || n.Allocated.Memory > 0 {
		allocTRES = fmt.Sprintf("cpu=%d,mem=%dM", alloc, n.Allocated.Memory>>20)
	}
	return []kv{
		{key: "NodeName", value: n.Name},
		{key: "Arch", value: "x86_64"},
		{key: "CoresPerSocket", value: "1"},
		{key: "CPUAlloc", value: strconv.FormatInt(alloc, 10), nl: true},
		{key: "CPUEfctv", value: strconv.FormatInt(cpus, 10)},
		{key: "CPUTot", value: strconv.FormatInt(cpus, 10)},
		{key: "CPULoad", value: "N/A"},
		{key: "AvailableFeatures", value: orNull(strings.Join(n.Labels, ",")), nl: true},
		{key: "ActiveFeatures", value: orNull(strings.Join(n.Labels, ",")), nl: true},
		{key: "Gres", value: gres, nl: true},
		{key: "NodeAddr", value: n.Addr, nl: true},
		{key: "NodeHostName", value: n.Name},
		{key: "Version", value: "22.05"},
		{key: "RealMemory", value: strconv.FormatInt(mem, 10), nl: true},
		{key: "AllocMem", value: strconv.FormatInt(n.Allocated.Memory>>20, 10)},
		{key: "FreeMem", value: "N/A"},
		{key: "Sockets", value: strconv.FormatInt(cpus, 10)},
		{key: "Boards", value: "1"},
		{key: "State", value: slurmNodeState(n), nl: true},
		{key: "ThreadsPerCore", value: "1"},
		{key: "TmpDisk", value: "0"},
		{key: "Weight", value: "1"},
		{key: "Owner", value: "N/A"},
		{key: "MCS_label", value: "N/A"},
		{key: "Partitions", value: orNull(strings.Join(n.Partitions, ",")), nl: true},
		{key: "BootTime", value: slurmTimeOr(n.Registered, "None"), nl: true},
		{key: "SlurmdStartTime", value: slurmTimeOr(n.Registered, "None")},
		{key: "CfgTRES", value: tres, nl: true},
		{key: "AllocTRES", value: allocTRES, nl: true},
		{key: "Reason", value: orNull(n.Reason), nl: true},
	}
}

// partitionRecord is scontrol show partition's record of p.
func partitionRecord(p api.PartitionInfo) []kv {
	yesNo := func(b bool) string {
		if b {
			return "YES"
		}
		return "NO"
	}
	accounts := "ALL"
	if len(p.AllowedAccounts) > 0 {
		accounts = strings.Join(p.AllowedAccounts, ",")
	}
	limit := func(d time.Duration, none string) string {
		if d <= 0 {
			return none
		}
		return cli.Elapsed(d)
	}
	maxNodes := "UNLIMITED"
	if p.MaxClusterSize > 0 {
		maxNodes = strconv.Itoa(p.MaxClusterSize)
	}
	cpus := p.Capacity.CPUMilli / 1000
	tres := fmt.Sprintf("cpu=%d,mem=%dM,node=%d,billing=%d", cpus, p.Capacity.Memory>>20, len(p.Nodes), cpus)
	if g := int(p.Capacity.GPU); g > 0 {
		tres += fmt.Sprintf(",gres/gpu=%d", g)
	}
	return []kv{
		{key: "PartitionName", value: p.Name},
		{key: "AllowGroups", value: "ALL", nl: true},
		{key: "AllowAccounts", value: accounts},
		{key: "AllowQos", value: "ALL"},
		{key: "AllocNodes", value: "ALL", nl: true},
		{key: "Default", value: yesNo(p.Default)},
		{key: "QoS", value: "N/A"},
		{key: "DefaultTime", value: limit(p.DefaultWalltime, "NONE"), nl: true},
		{key: "DisableRootJobs", value: "NO"},
		{key: "ExclusiveUser", value: "NO"},
		{key: "GraceTime", value: "0"},
		{key: "Hidden", value: "NO"},
		{key: "MaxNodes", value: maxNodes, nl: true},
		{key: "MaxTime", value: limit(p.MaxWalltime, "UNLIMITED")},
		{key: "MinNodes", value: "0"},
		{key: "LLN", value: "NO"},
		{key: "MaxCPUsPerNode", value: "UNLIMITED"},
		{key: "Nodes", value: orNull(cli.SlurmHostlist(p.Nodes)), nl: true},
		{key: "PriorityJobFactor", value: "1", nl: true},
		{key: "PriorityTier", value: strconv.Itoa(max(p.PriorityTier, 1))},
		{key: "RootOnly", value: "NO"},
		{key: "ReqResv", value: "NO"},
		{key: "OverSubscribe", value: "NO"},
		{key: "State", value: "UP", nl: true},
		{key: "TotalCPUs", value: strconv.FormatInt(cpus, 10)},
		{key: "TotalNodes", value: strconv.Itoa(len(p.Nodes))},
		{key: "TRES", value: tres, nl: true},
	}
}
