package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os/user"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/hostlist"
)

// SlurmState is the state Slurm 22.05's squeue -o %T and sacct show for
// j: PENDING (pending or held), CONFIGURING (placed, its containers
// being prepared), RUNNING, SUSPENDED (suspended, its containers frozen:
// scontrol suspend, a preemption; or stopped by bstop), COMPLETED,
// FAILED, CANCELLED, TIMEOUT, NODE_FAIL.
func SlurmState(j api.Job) string {
	switch j.State {
	case api.JobPending, api.JobHeld:
		return "PENDING"
	case api.JobScheduled, api.JobPreparing:
		if Stopped(j) {
			return "SUSPENDED" // its containers start stopped
		}
		return "CONFIGURING"
	case api.JobRunning:
		if j.Suspended != nil || Stopped(j) {
			return "SUSPENDED"
		}
		return "RUNNING"
	}
	return string(j.State) // the end states have Slurm's names
}

// slurmCompact are squeue's %t codes of SlurmState's names.
var slurmCompact = map[string]string{
	"PENDING": "PD", "CONFIGURING": "CF", "RUNNING": "R", "SUSPENDED": "S",
	"COMPLETED": "CD", "FAILED": "F", "CANCELLED": "CA", "TIMEOUT": "TO", "NODE_FAIL": "NF", "PREEMPTED": "PR", "REQUEUED": "RQ",
}

// SlurmCompactState is squeue's %t for j: PD, CF, R, S, CD, F, CA, TO, NF, PR.
func SlurmCompactState(j api.Job) string { return slurmCompact[SlurmState(j)] }

// SlurmStates are the states squeue -t and sacct -s take, long and
// compact.
func SlurmStates() []string {
	var out []string
	for long, short := range slurmCompact {
		out = append(out, long, short)
	}
	slices.Sort(out)
	return out
}

// SlurmExitCode is sacct's ExitCode, "exit:signal": a job whose code is
// above 128 (a shell's report of a death by signal, which is also how
// troupe records one) shows "0:signal", any other "code:0".
func SlurmExitCode(code int) string {
	if code > 128 && code < 128+65 {
		return "0:" + strconv.Itoa(code-128)
	}
	return strconv.Itoa(code) + ":0"
}

// SlurmTimeLimit is squeue's %l and sinfo's %l (Slurm's mins2time_str of
// a limit): "UNLIMITED" (squeue) or "infinite" (sinfo) for none, else
// [D-]H:MM:SS (M:SS under an hour).
func SlurmTimeLimit(d time.Duration, none string) string {
	if d <= 0 {
		return none
	}
	return Elapsed(d)
}

// SlurmTotalCPU is sacct's TotalCPU: [D-][HH:]MM:SS.mmm, the
// milliseconds shown under an hour as Slurm does.
func SlurmTotalCPU(d time.Duration) string {
	d = max(d, 0)
	if d < time.Hour {
		ms := int64(d / time.Millisecond)
		return fmt.Sprintf("%02d:%02d.%03d", ms/60000, ms/1000%60, ms%1000)
	}
	return SlurmElapsed(d)
}

// SlurmHostlist writes hosts as Slurm's ranged host list.
func SlurmHostlist(hosts []string) string { return hostlist.Compress(hosts) }

// slurmReasons are Slurm's names of troupe's pending reasons.
var slurmReasons = map[string]string{
	api.ReasonHeld:           "JobHeldUser",
	api.ReasonPartitionLimit: "PartitionConfig",
	api.ReasonAccountLimit:   "AssocGrpJobsLimit",
}

// SlurmReason is squeue's %r: why j waits, in Slurm's words ("None" for
// a job that does not).
func SlurmReason(j api.Job) string {
	if j.Suspended != nil && j.Suspended.Reason != "" {
		return j.Suspended.Reason
	}
	if j.State != api.JobPending && j.State != api.JobHeld {
		return "None"
	}
	r := j.Reason
	if r == "" {
		if j.State == api.JobHeld {
			return "JobHeldUser"
		}
		return "None"
	}
	if s, ok := slurmReasons[r]; ok {
		return s
	}
	return r
}

// SingletonDependency is Slurm's --dependency=singleton for a job of
// user named name, given the jobs schedd lists: after every unfinished
// one of theirs with that name has ended (afterany); nil when there is
// none.
func SingletonDependency(jobs []api.Job, user, name string) *api.Dependency {
	var d *api.Dependency
	for _, j := range jobs {
		if j.State.Terminal() || j.User != user || j.Name != name {
			continue
		}
		if d == nil {
			d = &api.Dependency{}
		}
		d.Conditions = append(d.Conditions, api.Condition{Kind: api.DepEnded, JobID: j.ID})
	}
	if d != nil && len(d.Conditions) > api.MaxConditions {
		d.Conditions = d.Conditions[len(d.Conditions)-api.MaxConditions:]
	}
	return d
}

// --- squeue -o

// squeueField is one %X of squeue -o.
type squeueField struct {
	title string
	value func(j api.Job, now time.Time) string
}

var squeueFields = map[byte]squeueField{
	'i': {"JOBID", func(j api.Job, _ time.Time) string { return SlurmJobID(j) }},
	'A': {"JOBID", func(j api.Job, _ time.Time) string { return strconv.FormatUint(j.ID, 10) }},
	'F': {"ARRAY_JOB_ID", func(j api.Job, _ time.Time) string { return SlurmArrayJobID(j) }},
	'K': {"ARRAY_TASK_ID", func(j api.Job, _ time.Time) string { return SlurmArrayTaskID(j) }},
	't': {"ST", func(j api.Job, _ time.Time) string { return SlurmCompactState(j) }},
	'T': {"STATE", func(j api.Job, _ time.Time) string { return SlurmState(j) }},
	'j': {"NAME", func(j api.Job, _ time.Time) string { return j.Name }},
	'u': {"USER", func(j api.Job, _ time.Time) string { return j.User }},
	'P': {"PARTITION", func(j api.Job, _ time.Time) string { return j.Partition }},
	'a': {"ACCOUNT", func(j api.Job, _ time.Time) string { return JobAccount(j) }},
	'M': {"TIME", func(j api.Job, now time.Time) string {
		if j.Started.IsZero() {
			return "0:00"
		}
		return Elapsed(JobTime(j, now))
	}},
	'l': {"TIME_LIMIT", func(j api.Job, _ time.Time) string { return SlurmTimeLimit(j.Walltime, "UNLIMITED") }},
	'D': {"NODES", func(j api.Job, _ time.Time) string {
		// The nodes a placed job holds; before that, its containers
		// (the most nodes it may take).
		if n := len(JobNodes(j)); n > 0 {
			return strconv.Itoa(n)
		}
		return strconv.Itoa(max(JobSize(j), 1))
	}},
	'C': {"CPUS", func(j api.Job, _ time.Time) string {
		var cpu float64
		for _, c := range j.Containers {
			cpu += c.Resources.CPU
		}
		if cpu == 0 {
			cpu = j.Spec.Resources.CPU * float64(max(j.Spec.Cluster.Size, 1))
		}
		return strconv.Itoa(int(cpu + 0.999))
	}},
	'N': {"NODELIST", func(j api.Job, _ time.Time) string { return SlurmHostlist(JobNodes(j)) }},
	'r': {"REASON", func(j api.Job, _ time.Time) string { return SlurmReason(j) }},
	'R': {"NODELIST(REASON)", func(j api.Job, _ time.Time) string {
		if j.State == api.JobPending || j.State == api.JobHeld {
			return "(" + SlurmReason(j) + ")"
		}
		return SlurmHostlist(JobNodes(j))
	}},
	'Z': {"WORK_DIR", func(j api.Job, _ time.Time) string { return j.Cwd }},
	'W': {"LICENSES", func(j api.Job, _ time.Time) string {
		if l := Licenses(j.Licenses); l != "" {
			return l
		}
		return "(null)"
	}},
	'V': {"SUBMIT_TIME", func(j api.Job, now time.Time) string { return slurmTime(j.Submitted, now) }},
	'S': {"START_TIME", func(j api.Job, now time.Time) string {
		if j.Started.IsZero() {
			if !j.EstimatedStart.IsZero() {
				return slurmTime(j.EstimatedStart, now)
			}
			return "N/A"
		}
		return slurmTime(j.Started, now)
	}},
}

// slurmTime is Slurm's default time format, ISO 8601 without a zone, in
// now's zone.
func slurmTime(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "Unknown"
	}
	return t.In(now.Location()).Format("2006-01-02T15:04:05")
}

// SqueueDefaultFormat is squeue's default -o.
const SqueueDefaultFormat = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"

// squeueItem is a literal or a field of a squeue -o format.
type squeueItem struct {
	literal string
	field   squeueField
	width   int
	right   bool
}

// SqueueFormat is a parsed squeue -o format.
type SqueueFormat []squeueItem

// The regexps here are compiled on first use, not at the start of every
// command that links this package (bsub starts in a few milliseconds).
var squeueSpec = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^%(\.?)(-?)([0-9]*)(.)`) })

// ParseSqueueFormat reads squeue's -o: text with %[.][width]X fields
// (. right-justifies; a value longer than its width is cut).
func ParseSqueueFormat(s string) (SqueueFormat, error) {
	var f SqueueFormat
	var lit strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '%' {
			lit.WriteByte(s[i])
			i++
			continue
		}
		if strings.HasPrefix(s[i:], "%%") {
			lit.WriteByte('%')
			i += 2
			continue
		}
		m := squeueSpec().FindStringSubmatch(s[i:])
		if m == nil {
			return nil, fmt.Errorf("%q: a %% ends the format; want %%[.][width]X", s)
		}
		fld, ok := squeueFields[m[4][0]]
		if !ok {
			return nil, fmt.Errorf("%%%s: unknown field; troupe's squeue knows %s", m[4], squeueFieldList())
		}
		if lit.Len() > 0 {
			f = append(f, squeueItem{literal: lit.String()})
			lit.Reset()
		}
		w := 0
		if m[3] != "" {
			w, _ = strconv.Atoi(m[3])
		}
		f = append(f, squeueItem{field: fld, width: w, right: m[1] == "."})
		i += len(m[0])
	}
	if lit.Len() > 0 {
		f = append(f, squeueItem{literal: lit.String()})
	}
	return f, nil
}

func squeueFieldList() string {
	var ks []string
	for k := range squeueFields {
		ks = append(ks, "%"+string(k))
	}
	slices.Sort(ks)
	return strings.Join(ks, " ")
}

// pad fits v into width as Slurm's _print_str: cut to width, then
// padded on the left (right-justified) or the right; width 0: as is.
func pad(v string, width int, right bool) string {
	if width <= 0 {
		return v
	}
	r := []rune(v)
	if len(r) > width {
		r = r[:width]
	}
	fill := strings.Repeat(" ", width-len(r))
	if right {
		return fill + string(r)
	}
	return string(r) + fill
}

// WriteSqueue writes jobs as squeue does with format f; header false is
// -h.
func WriteSqueue(w io.Writer, jobs []api.Job, f SqueueFormat, header bool, now time.Time) error {
	var b strings.Builder
	line := func(val func(squeueItem) string) {
		for _, it := range f {
			if it.field.value == nil {
				b.WriteString(it.literal)
				continue
			}
			b.WriteString(pad(val(it), it.width, it.right))
		}
		b.WriteString("\n")
	}
	if header {
		line(func(it squeueItem) string { return it.field.title })
	}
	for _, j := range jobs {
		line(func(it squeueItem) string { return cellReplacer.Replace(it.field.value(j, now)) })
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// --- sacct

// SacctJob is one job as sacct shows it, from the live jobs or the
// accounting store.
type SacctJob struct {
	ID uint64
	// JobID is how sacct names the job (SlurmJobID: "3_1" for an
	// element of a job array, whose own id ID is JobIDRaw).
	JobID    string
	ArrayID  uint64
	Index    int
	Group    string
	Walltime time.Duration
	ReqCPUs  int
	ReqMem   int64 // bytes, the whole job's
	GPUs     float64
	CPUTime  time.Duration
	MemPeak  int64
	// limitKnown: Walltime is the job's limit (a live job's; the
	// accounting store keeps none).
	limitKnown bool
	Name       string
	User       string
	UID        int
	Account    string
	Partition  string
	State      string // SlurmState's name
	ExitCode   int
	Nodes      []string
	CPUs       int
	Submitted  time.Time
	Started    time.Time
	Ended      time.Time
	WorkDir    string
	// Run is the job's run (its requeues before it): sacct -D shows
	// every run, else only the last.
	Run int
}

// SacctFromJob is j as sacct shows it at now.
func SacctFromJob(j api.Job) SacctJob {
	s := SacctJob{ID: j.ID, JobID: SlurmJobID(j), ArrayID: j.ArrayID, Index: j.ArrayIndex, Name: j.Name, User: j.User,
		UID: j.UID, Account: JobAccount(j), Partition: j.Partition, State: SlurmState(j), ExitCode: j.ExitCode,
		Nodes: JobNodes(j), Submitted: j.Submitted, Started: j.Started, Ended: j.Ended, WorkDir: j.Cwd,
		Group: strconv.Itoa(j.GID), Walltime: j.Walltime, CPUTime: j.CPUTime, MemPeak: j.MemPeak, limitKnown: true,
		Run: j.Requeues}
	if g, err := user.LookupGroupId(s.Group); err == nil {
		s.Group = g.Name
	}
	var cpu, gpu float64
	var mem int64
	for _, c := range j.Containers {
		cpu += c.Resources.CPU
		gpu += c.Resources.GPU
		mem += c.Resources.Memory
	}
	s.CPUs = int(cpu + 0.999)
	n := max(JobSize(j), 1)
	if len(j.Containers) == 0 {
		cpu = j.Spec.Resources.CPU * float64(n)
		gpu = j.Spec.Resources.GPU * float64(n)
		mem = j.Spec.Resources.Memory * int64(n)
	}
	s.ReqCPUs, s.GPUs, s.ReqMem = int(cpu+0.999), gpu, mem
	return s
}

// SacctFromHistory is an accounting store's record as sacct shows it.
func SacctFromHistory(h api.HistoryJob) SacctJob {
	s := SacctJob{ID: h.ID, JobID: SlurmJobID(api.Job{ID: h.ID, ArrayID: h.ArrayID, ArrayIndex: h.ArrayIndex}),
		ArrayID: h.ArrayID, Index: h.ArrayIndex, Name: h.Name, User: h.User, UID: h.UID, Account: h.Account,
		Partition: h.Partition, State: string(h.State), ExitCode: h.ExitCode, Nodes: h.Nodes, Submitted: h.Submitted,
		Started: h.Started, Ended: h.Ended, GPUs: h.GPUs, CPUTime: h.CPUTime, MemPeak: h.MemPeak, Group: "(null)",
		Run: h.Requeues}
	return s
}

// elapsed is the job's run time at now: none before it starts.
func (s SacctJob) elapsed(now time.Time) time.Duration {
	if s.Started.IsZero() {
		return 0
	}
	end := s.Ended
	if end.IsZero() {
		end = now
	}
	return end.Sub(s.Started)
}

// SacctField is one --format field of sacct, with Slurm's width
// (negative: left-justified).
type SacctField struct {
	Name  string
	Width int
	value func(s SacctJob, now time.Time) string
}

var sacctFields = []SacctField{
	{"Account", 10, func(s SacctJob, _ time.Time) string { return s.Account }},
	{"AllocCPUS", 10, func(s SacctJob, _ time.Time) string { return strconv.Itoa(s.CPUs) }},
	{"Elapsed", 10, func(s SacctJob, now time.Time) string { return SlurmElapsed(s.elapsed(now)) }},
	{"ElapsedRaw", 10, func(s SacctJob, now time.Time) string {
		return strconv.FormatInt(int64(s.elapsed(now)/time.Second), 10)
	}},
	{"End", 19, func(s SacctJob, now time.Time) string { return slurmTime(s.Ended, now) }},
	{"ExitCode", 8, func(s SacctJob, _ time.Time) string { return SlurmExitCode(s.ExitCode) }},
	{"Group", 9, func(s SacctJob, _ time.Time) string { return s.Group }},
	{"JobID", -12, func(s SacctJob, _ time.Time) string {
		if s.JobID != "" {
			return s.JobID
		}
		return strconv.FormatUint(s.ID, 10)
	}},
	{"JobIDRaw", -12, func(s SacctJob, _ time.Time) string { return strconv.FormatUint(s.ID, 10) }},
	{"JobName", 10, func(s SacctJob, _ time.Time) string { return s.Name }},
	{"NCPUS", 10, func(s SacctJob, _ time.Time) string { return strconv.Itoa(s.CPUs) }},
	{"NNodes", 8, func(s SacctJob, _ time.Time) string { return strconv.Itoa(max(len(s.Nodes), 1)) }},
	{"NodeList", 15, func(s SacctJob, _ time.Time) string {
		if len(s.Nodes) == 0 {
			return "None assigned"
		}
		return SlurmHostlist(s.Nodes)
	}},
	{"MaxRSS", 10, func(s SacctJob, _ time.Time) string {
		if s.MemPeak <= 0 {
			return ""
		}
		return strconv.FormatInt(s.MemPeak>>10, 10) + "K"
	}},
	{"Partition", 10, func(s SacctJob, _ time.Time) string { return s.Partition }},
	{"ReqCPUS", 8, func(s SacctJob, _ time.Time) string { return strconv.Itoa(s.ReqCPUs) }},
	{"ReqMem", 10, func(s SacctJob, _ time.Time) string {
		if s.ReqMem <= 0 {
			return "0"
		}
		return slurmMemory(s.ReqMem, false)
	}},
	{"ReqTRES", 10, func(s SacctJob, _ time.Time) string {
		if s.ReqCPUs == 0 && s.ReqMem == 0 {
			return ""
		}
		t := fmt.Sprintf("billing=%d,cpu=%d,mem=%s,node=%d", s.ReqCPUs, s.ReqCPUs, slurmMemory(s.ReqMem, false), max(len(s.Nodes), 1))
		if s.GPUs > 0 {
			t += fmt.Sprintf(",gres/gpu=%d", int(s.GPUs+0.999))
		}
		return t
	}},
	{"Start", 19, func(s SacctJob, now time.Time) string { return slurmTime(s.Started, now) }},
	{"State", 10, func(s SacctJob, _ time.Time) string { return s.State }},
	{"Submit", 19, func(s SacctJob, now time.Time) string { return slurmTime(s.Submitted, now) }},
	{"Timelimit", 10, func(s SacctJob, _ time.Time) string {
		switch {
		case !s.limitKnown:
			return "" // an accounting record keeps no limit
		case s.Walltime <= 0:
			return "UNLIMITED"
		}
		return SlurmElapsed(s.Walltime)
	}},
	{"TotalCPU", 10, func(s SacctJob, _ time.Time) string { return SlurmTotalCPU(s.CPUTime) }},
	{"UID", 6, func(s SacctJob, _ time.Time) string { return strconv.Itoa(s.UID) }},
	{"User", 9, func(s SacctJob, _ time.Time) string { return s.User }},
	{"WorkDir", 20, func(s SacctJob, _ time.Time) string { return s.WorkDir }},
}

// SacctDefaultFormat is sacct's default --format.
const SacctDefaultFormat = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"

// SacctFieldNames are the fields troupe's sacct knows, for its help.
func SacctFieldNames() []string {
	var out []string
	for _, f := range sacctFields {
		out = append(out, f.Name)
	}
	return out
}

// ParseSacctFormat reads sacct's --format: comma-separated field names,
// any case, each with an optional %WIDTH (%-WIDTH left-justifies).
func ParseSacctFormat(s string) ([]SacctField, error) {
	var out []SacctField
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, width, hasWidth := strings.Cut(item, "%")
		i := slices.IndexFunc(sacctFields, func(f SacctField) bool { return strings.EqualFold(f.Name, name) })
		if i < 0 {
			return nil, fmt.Errorf("%q: unknown field; troupe's sacct knows %s", name, strings.Join(SacctFieldNames(), ","))
		}
		f := sacctFields[i]
		if hasWidth {
			w, err := strconv.Atoi(width)
			if err != nil || w == 0 {
				return nil, fmt.Errorf("%s: %%%s: want a width such as %%20", item, width)
			}
			f.Width = w
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, errors.New("no fields")
	}
	return out, nil
}

// Sacct's output modes.
const (
	SacctTable     = iota // columns of Slurm's widths, a header and a rule
	SacctParsable         // -p: '|' after every field
	SacctParsable2        // -P: '|' between fields
)

// WriteSacct writes jobs as sacct does in mode, with fields; header
// false is -n.
func WriteSacct(w io.Writer, jobs []SacctJob, fields []SacctField, mode int, header bool, now time.Time) error {
	var b strings.Builder
	row := func(val func(SacctField) string, cut bool) {
		for i, f := range fields {
			v := val(f)
			switch {
			case mode == SacctParsable2 && i == len(fields)-1:
				b.WriteString(v)
			case mode != SacctTable:
				b.WriteString(v + "|")
			default:
				width := f.Width
				if width < 0 {
					width = -width
				}
				if cut && len([]rune(v)) > width {
					v = string([]rune(v)[:width-1]) + "+"
				}
				b.WriteString(pad(v, width, f.Width > 0) + " ")
			}
		}
		b.WriteString("\n")
	}
	if header {
		row(func(f SacctField) string { return f.Name }, false)
		if mode == SacctTable {
			row(func(f SacctField) string { return strings.Repeat("-", max(f.Width, -f.Width)) }, false)
		}
	}
	for _, j := range jobs {
		row(func(f SacctField) string {
			v := cellReplacer.Replace(f.value(j, now))
			if v == "" && mode == SacctTable {
				v = " "
			}
			return v
		}, true)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// --- sinfo

// SinfoDefaultFormat and SinfoNodeFormat are sinfo's default -o, and
// with -N.
const (
	SinfoDefaultFormat = "%#P %.5a %.10l %.6D %.6t %N"
	SinfoNodeFormat    = "%#N %.6D %#P %6t"
)

// SinfoRow is one line of sinfo: a partition's nodes in one state (or,
// with -N, one node in one partition).
type SinfoRow struct {
	Partition string
	Default   bool
	Walltime  time.Duration
	State     string // Slurm's compact node state: idle, mix, alloc, drain, drng, down*
	Nodes     []string
	Info      []api.Node // the nodes' records, as Nodes (zero for a node schedd does not know)
}

// SinfoNodeState is a node's state in sinfo's compact form: idle, mix
// (some cores allocated), alloc (all), drng (draining), drain, down*
// (not responding), maint and resv (a reservation's window is open).
func SinfoNodeState(n api.Node) string {
	switch {
	case n.State == api.NodeDown:
		return "down*" // * : not responding, troupe's only cause of down
	case n.State == api.NodeDrained:
		return "drain"
	case n.State == api.NodeDraining || n.Drain && n.Allocated.CPUMilli > 0:
		return "drng"
	case n.Drain:
		return "drain"
	case n.State == api.NodeMaint:
		return "maint" // a maintenance reservation's window is open
	case n.State == api.NodeReserved:
		return "resv" // a reservation's window is open
	case n.Allocated.CPUMilli <= 0 && n.Allocated.GPU <= 0:
		return "idle"
	case n.Allocated.CPUMilli >= n.Capacity.CPUMilli:
		return "alloc"
	}
	return "mix"
}

// SinfoRows groups the partitions' nodes by state, as sinfo does (one
// row per partition and state, the default partition's name starred);
// byNode makes one row per node and partition (-N), in node order.
func SinfoRows(parts []api.PartitionInfo, nodes []api.Node, byNode bool) []SinfoRow {
	state := map[string]string{}
	info := map[string]api.Node{}
	for _, n := range nodes {
		state[n.Name] = SinfoNodeState(n)
		info[n.Name] = n
	}
	infos := func(names []string) []api.Node {
		out := make([]api.Node, len(names))
		for i, n := range names {
			out[i] = info[n]
		}
		return out
	}
	var rows []SinfoRow
	for _, p := range parts {
		if len(p.Nodes) == 0 {
			rows = append(rows, SinfoRow{Partition: p.Name, Default: p.Default, Walltime: p.MaxWalltime, State: "n/a"})
			continue
		}
		var order []string
		by := map[string][]string{}
		for _, n := range p.Nodes {
			st := state[n]
			if st == "" {
				st = "down*"
			}
			if _, ok := by[st]; !ok {
				order = append(order, st)
			}
			by[st] = append(by[st], n)
		}
		for _, st := range order {
			if byNode {
				for _, n := range by[st] {
					rows = append(rows, SinfoRow{Partition: p.Name, Default: p.Default, Walltime: p.MaxWalltime, State: st, Nodes: []string{n}, Info: infos([]string{n})})
				}
				continue
			}
			rows = append(rows, SinfoRow{Partition: p.Name, Default: p.Default, Walltime: p.MaxWalltime, State: st, Nodes: by[st], Info: infos(by[st])})
		}
	}
	if byNode {
		slices.SortStableFunc(rows, func(a, b SinfoRow) int {
			if len(a.Nodes) == 0 || len(b.Nodes) == 0 {
				return cmp.Compare(len(a.Nodes), len(b.Nodes))
			}
			return cmp.Compare(a.Nodes[0], b.Nodes[0])
		})
	}
	return rows
}

type sinfoField struct {
	title string
	value func(r SinfoRow) string
}

var sinfoFields = map[byte]sinfoField{
	'P': {"PARTITION", func(r SinfoRow) string {
		if r.Default {
			return r.Partition + "*"
		}
		return r.Partition
	}},
	'R': {"PARTITION", func(r SinfoRow) string { return r.Partition }},
	'a': {"AVAIL", func(SinfoRow) string { return "up" }},
	'l': {"TIMELIMIT", func(r SinfoRow) string { return SlurmTimeLimit(r.Walltime, "infinite") }},
	'D': {"NODES", func(r SinfoRow) string { return strconv.Itoa(len(r.Nodes)) }},
	't': {"STATE", func(r SinfoRow) string { return r.State }},
	'T': {"STATE", func(r SinfoRow) string { return sinfoLongState[r.State] }},
	'N': {"NODELIST", func(r SinfoRow) string { return SlurmHostlist(r.Nodes) }},
	'n': {"HOSTNAMES", func(r SinfoRow) string { return strings.Join(r.Nodes, ",") }},
	'E': {"REASON", func(r SinfoRow) string { return sinfoReason(r).why }},
	'u': {"USER", func(r SinfoRow) string { return sinfoReason(r).by }},
	'H': {"TIMESTAMP", func(r SinfoRow) string { return sinfoReason(r).at }},
	'F': {"NODES(A/I/O/T)", func(r SinfoRow) string {
		var a, i, o int
		for _, n := range r.Info {
			switch SinfoNodeState(n) {
			case "alloc", "mix":
				a++
			case "idle":
				i++
			default:
				o++
			}
		}
		return fmt.Sprintf("%d/%d/%d/%d", a, i, o, len(r.Info))
	}},
	'C': {"CPUS(A/I/O/T)", func(r SinfoRow) string {
		var a, i, o, t int64
		for _, n := range r.Info {
			total := n.Capacity.CPUMilli / 1000
			used := min((n.Allocated.CPUMilli+999)/1000, total)
			t += total
			switch SinfoNodeState(n) {
			case "down*", "drain":
				o += total
			default:
				a, i = a+used, i+total-used
			}
		}
		return fmt.Sprintf("%d/%d/%d/%d", a, i, o, t)
	}},
	'c': {"CPUS", func(r SinfoRow) string {
		lo, hi := int64(-1), int64(0)
		for _, n := range r.Info {
			c := n.Capacity.CPUMilli / 1000
			if lo < 0 || c < lo {
				lo = c
			}
			hi = max(hi, c)
		}
		switch {
		case lo < 0:
			return "0"
		case lo < hi:
			return strconv.FormatInt(lo, 10) + "+"
		}
		return strconv.FormatInt(lo, 10)
	}},
	'f': {"AVAIL_FEATURES", func(r SinfoRow) string {
		var fs []string
		for _, n := range r.Info {
			for _, l := range n.Labels {
				if !slices.Contains(fs, l) {
					fs = append(fs, l)
				}
			}
		}
		if len(fs) == 0 {
			return "(null)"
		}
		return strings.Join(fs, ",")
	}},
	'G': {"GRES", func(r SinfoRow) string { return sinfoGres(r, func(n api.Node) float64 { return n.Capacity.GPU }) }},
	// Slurm has no -o letter for GresUsed; -O GresUsed is this one.
	'U': {"GRES_USED", func(r SinfoRow) string { return sinfoGres(r, func(n api.Node) float64 { return n.Allocated.GPU }) }},
}

// sinfoGres is a row's GPUs as Slurm's Gres and GresUsed write them:
// "gpu:4" (the most on one of its nodes), "(null)" without any.
func sinfoGres(r SinfoRow, count func(api.Node) float64) string {
	most := 0.0
	for _, n := range r.Info {
		most = max(most, count(n))
	}
	if most <= 0 {
		return "(null)"
	}
	return "gpu:" + strconv.Itoa(int(math.Ceil(most)))
}

// sinfoLongFields are sinfo -O's names of its -o letters.
var sinfoLongFields = map[string]byte{
	"available": 'a', "cpus": 'c', "cpusstate": 'C', "features": 'f', "gres": 'G', "gresused": 'U',
	"nodeaddr": 'n', "nodehost": 'n', "nodelist": 'N', "nodes": 'D', "nodeai": 'F', "nodeaiot": 'F',
	"partition": 'P', "partitionname": 'R', "statecompact": 't', "statelong": 'T', "time": 'l',
}

// SinfoLongFormat turns sinfo -O's TYPE[:[.]SIZE[SUFFIX]],… into the -o
// format WriteSinfo reads (20 wide without a size).
func SinfoLongFormat(s string) (string, error) {
	var b strings.Builder
	for item := range strings.SplitSeq(s, ",") {
		if item == "" {
			continue
		}
		name, spec, hasSpec := strings.Cut(item, ":")
		c, ok := sinfoLongFields[strings.ToLower(strings.TrimSpace(name))]
		if !ok {
			var ns []string
			for n := range sinfoLongFields {
				ns = append(ns, n)
			}
			slices.Sort(ns)
			return "", fmt.Errorf("invalid node format specification: %s; troupe's sinfo -O knows %s", name, strings.Join(ns, ","))
		}
		width, right, suffix := "20", "", ""
		if hasSpec {
			if rest, ok := strings.CutPrefix(spec, "."); ok {
				right, spec = ".", rest
			}
			digits := len(spec) - len(strings.TrimLeft(spec, "0123456789"))
			width, suffix = spec[:digits], spec[digits:]
		}
		b.WriteString("%" + right + width + string(c) + strings.ReplaceAll(suffix, "%", ""))
	}
	return b.String(), nil
}

var sinfoLongState = map[string]string{
	"idle": "idle", "mix": "mixed", "alloc": "allocated", "drng": "draining", "drain": "drained", "down*": "down*", "n/a": "n/a",
}

var sinfoSpec = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^%(\.?)(-?)(#|[0-9]*)(.)`) })

// WriteSinfo writes rows as sinfo does with format (its -o); header
// false is -h. A "#" width is the widest value's (or title's).
func WriteSinfo(w io.Writer, rows []SinfoRow, format string, header bool) error {
	type item struct {
		literal string
		field   *sinfoField
		width   int
		right   bool
	}
	var items []item
	var lit strings.Builder
	for i := 0; i < len(format); {
		if format[i] != '%' {
			lit.WriteByte(format[i])
			i++
			continue
		}
		m := sinfoSpec().FindStringSubmatch(format[i:])
		if m == nil {
			return fmt.Errorf("-o %q: a %% ends the format; want %%[.][width]X", format)
		}
		f, ok := sinfoFields[m[4][0]]
		if !ok {
			var ks []string
			for k := range sinfoFields {
				ks = append(ks, "%"+string(k))
			}
			slices.Sort(ks)
			return fmt.Errorf("-o: %%%s: unknown field; troupe's sinfo knows %s", m[4], strings.Join(ks, " "))
		}
		if lit.Len() > 0 {
			items = append(items, item{literal: lit.String()})
			lit.Reset()
		}
		it := item{field: &f, right: m[1] == "."}
		switch m[3] {
		case "":
		case "#":
			it.width = len(f.title)
			for _, r := range rows {
				it.width = max(it.width, len(f.value(r)))
			}
		default:
			it.width, _ = strconv.Atoi(m[3])
		}
		items = append(items, it)
		i += len(m[0])
	}
	if lit.Len() > 0 {
		items = append(items, item{literal: lit.String()})
	}
	var b strings.Builder
	line := func(val func(*sinfoField) string) {
		for _, it := range items {
			if it.field == nil {
				b.WriteString(it.literal)
				continue
			}
			b.WriteString(pad(val(it.field), it.width, it.right))
		}
		b.WriteString("\n")
	}
	if header {
		line(func(f *sinfoField) string { return f.title })
	}
	for _, r := range rows {
		line(func(f *sinfoField) string { return cellReplacer.Replace(f.value(r)) })
	}
	_, err := io.WriteString(w, b.String())
	return err
}
