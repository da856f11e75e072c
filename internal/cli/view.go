package cli

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// QueueHeader are the columns of bqueue.
var QueueHeader = QueueColumns

// SortJobs returns jobs in id order (a sorted copy).
func SortJobs(jobs []api.Job) []api.Job {
	jobs = slices.Clone(jobs)
	slices.SortFunc(jobs, compareIDs)
	return jobs
}

// SortNodes returns nodes in name order (a sorted copy).
func SortNodes(nodes []api.Node) []api.Node {
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b api.Node) int { return cmp.Compare(a.Name, b.Name) })
	return nodes
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// SortQueue returns jobs in bqueue's order (a sorted copy): started jobs,
// then pending ones by priority, highest first (ties by queue position,
// then id), then held and ended ones, each group in id order.
func SortQueue(jobs []api.Job) []api.Job {
	group := func(j api.Job) int {
		switch {
		case j.State == api.JobPending:
			return 1
		case j.State == api.JobHeld:
			return 2
		case j.State.Terminal():
			return 3
		}
		return 0
	}
	jobs = slices.Clone(jobs)
	slices.SortStableFunc(jobs, func(a, b api.Job) int {
		if c := cmp.Compare(group(a), group(b)); c != 0 {
			return c
		}
		if group(a) == 1 {
			if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
				return c
			}
			if c := cmp.Compare(a.QueuePosition, b.QueuePosition); c != 0 {
				return c
			}
		}
		return compareIDs(a, b)
	})
	return jobs
}

// WriteQueue writes jobs as bqueue's table, in queue order (SortQueue).
func WriteQueue(w io.Writer, jobs []api.Job, now time.Time) error {
	return WriteJobColumns(w, SortQueue(jobs), MustColumns(QueueColumns), now)
}

// StartHeader are the columns of bqueue --start, as squeue --start shows.
var StartHeader = []string{"JOBID", "USER", "PARTITION", "NAME", "STATE", "SIZE", "START_TIME", "REASON"}

// WriteQueueStart writes pending jobs with their expected start: the
// scheduler's estimate for jobs that hold a backfill reservation, "-"
// (unknown) for the others. Times show in now's location.
func WriteQueueStart(w io.Writer, jobs []api.Job, now time.Time) error {
	jobs = SortJobs(jobs)
	t := NewTable(w, StartHeader...)
	for _, j := range jobs {
		if j.State != api.JobPending {
			continue
		}
		t.Row(JobID(j), j.User, j.Partition, j.Name, string(j.State),
			strconv.Itoa(JobSize(j)), Timestamp(j.EstimatedStart, now.Location()), JobReason(j))
	}
	return t.Flush()
}

// JobSize is the number of containers of j's session.
func JobSize(j api.Job) int {
	if len(j.Containers) > 0 {
		return len(j.Containers)
	}
	return j.Spec.Cluster.Size
}

// JobNodes are the distinct nodes j's containers are placed on, in rank
// order.
func JobNodes(j api.Job) []string {
	var nodes []string
	for _, c := range j.Containers {
		if c.Node != "" && !slices.Contains(nodes, c.Node) {
			nodes = append(nodes, c.Node)
		}
	}
	return nodes
}

// JobTime is what bqueue's TIME shows: the run time of an ended job, the
// time since start of a started one, the time since submission otherwise.
func JobTime(j api.Job, now time.Time) time.Duration {
	switch {
	case j.State.Terminal():
		if j.Started.IsZero() {
			return 0
		}
		end := j.Ended
		if end.IsZero() {
			end = now
		}
		return end.Sub(j.Started) - SuspendedTime(j, end)
	case !j.Started.IsZero():
		return now.Sub(j.Started) - SuspendedTime(j, now)
	}
	return now.Sub(j.Submitted)
}

// SuspendedTime is how long j's current run has been suspended by now
// (its ended suspensions, and the one under way): its run time, like its
// walltime, leaves it out, as Slurm's does.
func SuspendedTime(j api.Job, now time.Time) time.Duration {
	d := j.SuspendedFor
	if s := j.Suspended; s != nil && now.After(s.Since) {
		d += now.Sub(s.Since)
	}
	return d
}

// JobReason is the pending reason of a waiting job, the end cause of an
// ended one, and "" (shown "-") otherwise.
func JobReason(j api.Job) string {
	if j.Suspended != nil && !j.State.Terminal() {
		return j.Suspended.Reason
	}
	if j.State == api.JobPending || j.State == api.JobHeld || j.State.Terminal() {
		return j.Reason
	}
	return ""
}

// StateWithReason is "PENDING (Resources)", or the bare state when there
// is no reason to show.
func StateWithReason(j api.Job) string {
	if r := JobReason(j); r != "" {
		return fmt.Sprintf("%s (%s)", QueueState(j), r)
	}
	return QueueState(j)
}

// SuspendedState is how bqueue shows a running job that is suspended.
const SuspendedState = "SUSPENDED"

// QueueState is the state bqueue shows for j: its state, SUSPENDED for a
// running job while it is suspended (its containers frozen).
func QueueState(j api.Job) string {
	if j.Suspended != nil && !j.State.Terminal() {
		return SuspendedState
	}
	return string(j.State)
}

// PriorityBreakdown is a pending job's priority with its weighted
// factors: "12345 (age 100, fair-share 9000, size 200, partition 3000,
// nice -10)"; "" when schedd gave none.
func PriorityBreakdown(j api.Job) string {
	f := j.PriorityFactors
	if f == nil {
		return ""
	}
	n := func(x float64) string { return Number(x, 0) }
	return fmt.Sprintf("%s (age %s, fair-share %s, size %s, partition %s, nice %s)",
		n(j.Priority), n(f.Age), n(f.FairShare), n(f.JobSize), n(f.Partition), n(f.Nice))
}

// DependencyCondition is where one condition of a dependency stands, as
// bjob lists it: "satisfied (job 12 COMPLETED)", "waiting (job 12
// RUNNING)", "never satisfied (job 12 FAILED)".
func DependencyCondition(c api.Condition) string {
	status := map[api.DepStatus]string{api.DepSatisfied: "satisfied", api.DepWaiting: "waiting", api.DepNever: "never satisfied"}[c.Status]
	if status == "" {
		status = "unknown"
	}
	if c.JobState == "" {
		return fmt.Sprintf("%s (job %s unknown)", status, c.Ref())
	}
	return fmt.Sprintf("%s (job %s %s)", status, c.Ref(), c.JobState)
}

// ContainerHeader are the columns of bjob's per-container table.
var ContainerHeader = []string{"HOST", "ROLE", "NODE", "ADDR", "STATE", "EXIT", "KERNEL_ID"}

// WriteJob writes bjob's detail view of j; timestamps are shown in now's
// location.
func WriteJob(w io.Writer, j api.Job, now time.Time) error { return WriteJobAt(w, j, now, "") }

// AppURL is where schedd at addr (its TROUPE_ADDR) serves job's service
// name: the full URL over http(s), its path on a unix socket.
func AppURL(addr string, job uint64, name string) string {
	p := "/apps/" + strconv.FormatUint(job, 10) + "/" + name + "/"
	addr, _, _ = strings.Cut(addr, ",") // the first of several peers
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimRight(addr, "/") + p
	}
	return p
}

// WriteJobAt is WriteJob, with the job's services at their URLs on
// schedd at addr (AppURL).
func WriteJobAt(w io.Writer, j api.Job, now time.Time, addr string) error {
	s := j.Spec
	exit := JobExitCode(j)
	walltime := "partition default"
	switch {
	case s.Walltime > 0:
		walltime = Elapsed(s.Walltime)
	case j.Walltime > 0:
		walltime = Elapsed(j.Walltime) + " (partition default)"
	}
	res := fmt.Sprintf("%s cpu, %s GiB memory", Number(s.Resources.CPU, 3), GiB(s.Resources.Memory))
	if s.Resources.GPU > 0 {
		res += fmt.Sprintf(", %s gpu", Number(s.Resources.GPU, 3))
	}
	res += " per container"
	mode := s.Cluster.Mode
	if mode == "" {
		mode = "-"
	}

	fmt.Fprintf(w, "Job %s: %s\n", JobID(j), cell(j.Name))
	kv := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	pair := func(k, v string) { fmt.Fprintf(kv, "  %s:\t%s\n", k, cell(v)) }
	if a := j.Array; a != nil {
		limit := "no limit"
		if a.MaxRunning > 0 {
			limit = fmt.Sprintf("at most %d running", a.MaxRunning)
		}
		pair("Array", fmt.Sprintf("%s elements [%s], %s", strconv.Itoa(a.Count), a.Indices, limit))
		pair("Elements", ArrayCounts(j))
	}
	if j.ArrayID != 0 {
		elem := fmt.Sprintf("index %d of job array %d", j.ArrayIndex, j.ArrayID)
		if j.ID != 0 {
			elem += fmt.Sprintf(" (its own job id %d)", j.ID)
		}
		pair("Array element", elem)
	}
	pair("User", fmt.Sprintf("%s (uid %d, gid %d)", cell(j.User), j.UID, j.GID))
	pair("Partition", j.Partition)
	pair("Account", JobAccount(j))
	if j.Spec.Reservation != "" {
		pair("Reservation", j.Spec.Reservation)
	}
	pair("State", StateWithReason(j))
	if j.State == api.JobPending && j.PriorityFactors != nil {
		pair("Priority", PriorityBreakdown(j))
	}
	if j.State == api.JobPending && j.QueuePosition > 0 {
		pos := strconv.Itoa(j.QueuePosition)
		if j.QueueLength > 0 {
			pos += " of " + strconv.Itoa(j.QueueLength)
		}
		pair("Queue position", pos)
	}
	if d := j.DependsOn; d != nil {
		pair("Dependency", d.String())
		for _, c := range d.Conditions {
			pair("  "+c.String(), DependencyCondition(c))
		}
	}
	pair("Exit code", exit)
	pair("Session", j.SessionID)
	if j.Network != nil {
		pair("Network", fmt.Sprintf("%s (vni %d)", j.Network.Subnet, j.Network.VNI))
	}
	pair("Cluster", fmt.Sprintf("%s, %s", plural(JobSize(j), "container"), mode))
	pair("Resources", res)
	if len(j.Licenses) > 0 {
		pair("Licenses", Licenses(j.Licenses))
	}
	pair("Image", s.Image)
	pair("Command", ShellJoin(s.Command))
	pair("Walltime", walltime)
	pair("Cwd", j.Cwd)
	pair("Output", s.Output)
	if s.Error != "" {
		pair("Error", s.Error)
	}
	for _, sv := range s.Services {
		pair("Service "+sv.Name, fmt.Sprintf("%s (port %d)", AppURL(addr, j.ID, sv.Name), sv.Port))
	}
	pair("Submitted", Timestamp(j.Submitted, now.Location()))
	if j.State == api.JobPending && !j.EstimatedStart.IsZero() {
		pair("Expected start", Timestamp(j.EstimatedStart, now.Location()))
	}
	pair("Started", Timestamp(j.Started, now.Location()))
	pair("Ended", Timestamp(j.Ended, now.Location()))
	pair("Time", Elapsed(JobTime(j, now)))
	if j.State.Terminal() {
		pair("CPU time", CPUTime(j.CPUTime))
		pair("Mem peak", Memory(j.MemPeak))
	}
	for _, sg := range j.Signals {
		to := "all containers"
		if sg.Host != "" {
			to = sg.Host
		}
		pair("Signalled", fmt.Sprintf("SIG%s to %s at %s", api.SignalName(sg.Signal), to, Timestamp(sg.Time, now.Location())))
	}
	// Where the submit hosts and the user's other jobs reach each
	// container, on a site whose default networks are routed.
	var reach []string
	for _, c := range j.Containers {
		if c.Reach != "" && !c.State.Ended() {
			reach = append(reach, c.Host+" "+c.Reach)
		}
	}
	if len(reach) > 0 {
		pair("Reachable at", strings.Join(reach, ", "))
	}
	if err := kv.Flush(); err != nil {
		return err
	}
	if len(j.Containers) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t := NewTable(w, ContainerHeader...)
	var msgs []string
	for _, c := range j.Containers {
		cexit := "-"
		if c.State.Ended() {
			cexit = strconv.Itoa(c.ExitCode)
		}
		t.Row(c.Host, c.Role, c.Node, c.Addr, string(c.State), cexit, c.KernelID)
		if c.Message != "" {
			msgs = append(msgs, fmt.Sprintf("  %s: %s", c.Host, oneLine(c.Message)))
		}
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if len(msgs) > 0 {
		fmt.Fprintf(w, "\nMessages:\n%s\n", strings.Join(msgs, "\n"))
	}
	return nil
}

// HostsHeader are the columns of bhosts.
var HostsHeader = []string{"HOST", "STATE", "CPU(alloc/total)", "MEMORY(alloc/total)", "GPU", "LABELS", "PARTITIONS", "REASON"}

// WriteHosts writes nodes as bhosts' table, in name order. REASON is
// that of a drained or DOWN node.
func WriteHosts(w io.Writer, nodes []api.Node) error {
	nodes = SortNodes(nodes)
	t := NewTable(w, HostsHeader...)
	for _, n := range nodes {
		gpu := "-"
		if n.Capacity.GPU > 0 {
			gpu = Number(n.Allocated.GPU, 2) + "/" + Number(n.Capacity.GPU, 2)
		}
		t.Row(
			n.Name,
			string(n.State),
			Cores(n.Allocated.CPUMilli)+"/"+Cores(n.Capacity.CPUMilli),
			GiB(n.Allocated.Memory)+"/"+GiB(n.Capacity.Memory)+"GiB",
			gpu,
			strings.Join(n.Labels, ","),
			strings.Join(n.Partitions, ","),
			n.Reason,
		)
	}
	return t.Flush()
}

// WriteHostsLong writes bhosts -l: each node's details and, per GPU
// device, the share allocated and free and the jobs holding it, so that
// a user sees why a fractional request (gpu = 0.6) waits: it must fit
// the free share of one device.
// Times are shown in loc.
func WriteHostsLong(w io.Writer, nodes []api.Node, loc *time.Location) error {
	for i, n := range SortNodes(nodes) {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "HOST %s\n", cell(n.Name))
		kv := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
		pair := func(k, v string) { fmt.Fprintf(kv, "  %s:\t%s\n", k, cell(v)) }
		pair("State", string(n.State))
		pair("Address", n.Addr)
		pair("Runtime", n.Runtime)
		if n.OCIRuntime != "" { // the runc driver's binary (crun or runc) and version
			pair("OCI runtime", n.OCIRuntime)
		}
		pair("CPU", Cores(n.Allocated.CPUMilli)+" of "+Cores(n.Capacity.CPUMilli)+" cores allocated")
		pair("Memory", GiB(n.Allocated.Memory)+" of "+GiB(n.Capacity.Memory)+" GiB allocated")
		if n.Capacity.GPU > 0 {
			pair("GPU", Number(n.Allocated.GPU, 2)+" of "+Number(n.Capacity.GPU, 2)+" allocated")
		}
		pair("Labels", strings.Join(n.Labels, ","))
		pair("Partitions", strings.Join(n.Partitions, ","))
		if n.Reason != "" {
			pair("Reason", n.Reason)
		}
		if n.Drain {
			pair("Drained by", n.DrainedBy+" at "+Timestamp(n.DrainedAt, loc))
		}
		if n.Health != "" && n.Health != n.Reason {
			// An admin's drain shows above; the failing check too.
			pair("Health check", "failing: "+n.Health)
		}
		if n.Reservation != "" { // the one open on it, else the next
			pair("Reservation", n.Reservation)
		}
		if err := kv.Flush(); err != nil {
			return err
		}
		if len(n.GPUs) == 0 {
			continue
		}
		fmt.Fprintln(w)
		t := NewTable(w, "  GPU", "ALLOCATED", "FREE", "JOBS")
		for _, g := range n.GPUs {
			jobs := make([]string, len(g.Jobs))
			for k, id := range g.Jobs {
				jobs[k] = strconv.FormatUint(id, 10)
			}
			t.Row("  "+strconv.Itoa(g.Device), Number(g.Allocated, 2), Number(max(0, 1-g.Allocated), 2), strings.Join(jobs, ","))
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// The regexps here are compiled on first use, not at the start of every
// command that links this package (bsub starts in a few milliseconds).
var shellSafe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`) })

// ShellJoin joins argv as a shell would need it typed.
func ShellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if shellSafe().MatchString(a) {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
