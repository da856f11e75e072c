package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// LSF's job states, as bjobs shows them.
const (
	LSFPend    = "PEND"
	LSFPSusp   = "PSUSP"
	LSFRun     = "RUN"
	LSFUSusp   = "USUSP"
	LSFSSusp   = "SSUSP"
	LSFDone    = "DONE"
	LSFExit    = "EXIT"
	LSFUnknown = "UNKWN"
)

// LSFState is the state LSF's bjobs would show for j: PEND (pending),
// PSUSP (held), RUN (scheduled, starting or running), SSUSP (running but
// suspended by the system: its containers frozen by an admin's suspend
// or a preemption, its CPUs and GPUs lent to others), USUSP (running but
// stopped by bstop: the last STOP or CONT sent to all its containers was
// STOP), DONE (completed), EXIT (failed, cancelled, timed out, node
// failed, preempted: LSF has no end state of its own for it), UNKWN (a
// state troupe does not know).
func LSFState(j api.Job) string {
	switch j.State {
	case api.JobPending:
		return LSFPend
	case api.JobHeld:
		return LSFPSusp
	case api.JobScheduled, api.JobPreparing, api.JobRunning:
		if j.Suspended != nil {
			return LSFSSusp
		}
		if Stopped(j) {
			return LSFUSusp
		}
		return LSFRun
	case api.JobCompleted:
		return LSFDone
	case api.JobFailed, api.JobCancelled, api.JobTimeout, api.JobNodeFail, api.JobPreempted:
		return LSFExit
	}
	return LSFUnknown
}

// Stopped reports whether j's containers are stopped: the last SIGSTOP
// or SIGCONT request to all of them is SIGSTOP.
func Stopped(j api.Job) bool {
	for i := len(j.Signals) - 1; i >= 0; i-- {
		s := j.Signals[i]
		if s.Host != "" {
			continue
		}
		switch syscall.Signal(s.Signal) {
		case syscall.SIGSTOP:
			return true
		case syscall.SIGCONT:
			return false
		}
	}
	return false
}

// lsfStates maps the state names bjobs -s-style filters take.
var lsfStates = []string{LSFPend, LSFPSusp, LSFRun, LSFUSusp, LSFSSusp, LSFDone, LSFExit, LSFUnknown}

// LSFStates are LSF's state names, in bjobs's order.
func LSFStates() []string { return slices.Clone(lsfStates) }

// LSF's time formats.
const (
	lsfShortTime = "Jan _2 15:04"   // bjobs and bjobs -o
	lsfLongTime  = "01/02-15:04:05" // bjobs -W
)

// lsfTime formats t in now's zone, "-" when unset.
func lsfTime(t time.Time, layout string, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(now.Location()).Format(layout)
}

// ExecHosts is LSF's EXEC_HOST list for j: each node the job's
// containers run on, with the slots (cores) there, "4*node01", in the
// order the containers rank; empty for a job not placed.
func ExecHosts(j api.Job) []string {
	if LSFState(j) == LSFPend || LSFState(j) == LSFPSusp {
		return nil
	}
	var order []string
	slots := map[string]float64{}
	for _, c := range j.Containers {
		if c.Node == "" {
			continue
		}
		if _, ok := slots[c.Node]; !ok {
			order = append(order, c.Node)
		}
		slots[c.Node] += c.Resources.CPU
	}
	var out []string
	for _, n := range order {
		k := int(slots[n] + 0.999)
		if k <= 1 {
			out = append(out, n)
		} else {
			out = append(out, fmt.Sprintf("%d*%s", k, n))
		}
	}
	return out
}

// lsfTrunc fits s in width as LSF does: a longer value keeps its last
// width-1 characters after a '*'.
func lsfTrunc(s string, width int) string {
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	return "*" + string(r[len(r)-width+1:])
}

// BjobsView is one of bjobs's fixed column sets.
type BjobsView int

// bjobs's views.
const (
	BjobsDefault BjobsView = iota // JOBID ... SUBMIT_TIME, values cut to their column
	BjobsWide                     // -w: the same columns, values in full
	BjobsLong                     // -W: more columns, MM/DD-HH:MM:SS times, in full
)

// bjobsColumns are the default view's columns and widths (the column is
// one wider: a space follows).
var bjobsColumns = []struct {
	name  string
	width int
}{
	{"JOBID", 7}, {"USER", 7}, {"STAT", 5}, {"QUEUE", 10}, {"FROM_HOST", 11},
	{"EXEC_HOST", 11}, {"JOB_NAME", 10}, {"SUBMIT_TIME", 0},
}

// WriteBjobs writes jobs as bjobs does in view; header false is
// -noheader. A job on more than one node has one more line per node,
// with only EXEC_HOST, as LSF's.
func WriteBjobs(w io.Writer, jobs []api.Job, view BjobsView, header bool, now time.Time) error {
	var b strings.Builder
	names := []string{}
	for _, c := range bjobsColumns {
		names = append(names, c.name)
	}
	if view == BjobsLong {
		names = append(names, "PROJ_NAME", "CPU_USED", "MEM", "SWAP", "PIDS", "START_TIME", "FINISH_TIME")
	}
	line := func(vals []string) {
		for i, v := range vals {
			width := 0
			if i < len(bjobsColumns) {
				width = bjobsColumns[i].width
			}
			if view == BjobsDefault && width > 0 {
				v = lsfTrunc(v, width)
			}
			if i == len(vals)-1 {
				b.WriteString(v)
				break
			}
			b.WriteString(v)
			b.WriteString(strings.Repeat(" ", max(width-len([]rune(v)), 0)+1))
		}
		b.WriteString("\n")
	}
	if header {
		line(names)
	}
	for _, j := range jobs {
		hosts := ExecHosts(j)
		first := "-"
		if len(hosts) > 0 {
			first = hosts[0]
		}
		if view == BjobsDefault && len(hosts) == 0 {
			first = ""
		}
		if view != BjobsDefault && len(hosts) > 1 {
			first = strings.Join(hosts, ":")
		}
		submit := lsfTime(j.Submitted, lsfShortTime, now)
		if view == BjobsLong {
			submit = lsfTime(j.Submitted, lsfLongTime, now)
		}
		vals := []string{strconv.FormatUint(j.ID, 10), cell(j.User), LSFState(j), cell(j.Partition), "-", first, cell(j.Name), submit}
		if view == BjobsLong {
			vals = append(vals, dash(j.Account), lsfCPU(j), lsfMem(j), "0", "-",
				lsfTime(j.Started, lsfLongTime, now), lsfTime(j.Ended, lsfLongTime, now))
		}
		line(vals)
		if view == BjobsDefault {
			pad := 0
			for _, c := range bjobsColumns[:5] {
				pad += c.width + 1
			}
			for _, h := range hosts[min(1, len(hosts)):] {
				b.WriteString(strings.Repeat(" ", pad) + lsfTrunc(h, 11) + "\n")
			}
		}
	}
	_, err := io.WriteString(w, trimLines(b.String()))
	return err
}

// trimLines drops the spaces ending each line.
func trimLines(s string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if strings.HasSuffix(l, "\n") {
			lines[i] = strings.TrimRight(l[:len(l)-1], " ") + "\n"
		}
	}
	return strings.Join(lines, "")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// lsfCPU is CPU_USED: the containers' CPU time, HHH:MM:SS.ss.
func lsfCPU(j api.Job) string {
	var d time.Duration
	for _, c := range j.Containers {
		d += c.CPUTime
	}
	cs := d.Milliseconds() / 10
	return fmt.Sprintf("%03d:%02d:%02d.%02d", cs/360000, cs/6000%60, cs/100%60, cs%100)
}

// lsfMem is MEM: the containers' summed peak memory in KB
// (LSF_UNIT_FOR_LIMITS), 0 when not known.
func lsfMem(j api.Job) string {
	var m int64
	for _, c := range j.Containers {
		m += c.MemPeak
	}
	return strconv.FormatInt(m>>10, 10)
}

// BjobsField is one field of bjobs -o.
type BjobsField struct {
	Name  string // lower-case, as given: "jobid", "stat"
	Width int    // 0: the field's own width
	Right bool   // "-" before the width: right-justified
}

// bjobsFields are the -o fields troupe has, with their headers and
// default widths.
var bjobsFields = map[string]struct {
	header string
	width  int
	value  func(j api.Job, now time.Time) string
}{
	"jobid":       {"JOBID", 7, func(j api.Job, _ time.Time) string { return strconv.FormatUint(j.ID, 10) }},
	"jobindex":    {"JOBINDEX", 8, func(api.Job, time.Time) string { return "0" }},
	"stat":        {"STAT", 5, func(j api.Job, _ time.Time) string { return LSFState(j) }},
	"user":        {"USER", 7, func(j api.Job, _ time.Time) string { return j.User }},
	"queue":       {"QUEUE", 10, func(j api.Job, _ time.Time) string { return j.Partition }},
	"job_name":    {"JOB_NAME", 10, func(j api.Job, _ time.Time) string { return cell(j.Name) }},
	"name":        {"JOB_NAME", 10, func(j api.Job, _ time.Time) string { return cell(j.Name) }},
	"proj_name":   {"PROJ_NAME", 11, func(j api.Job, _ time.Time) string { return dash(j.Account) }},
	"project":     {"PROJ_NAME", 11, func(j api.Job, _ time.Time) string { return dash(j.Account) }},
	"from_host":   {"FROM_HOST", 11, func(api.Job, time.Time) string { return "-" }},
	"exec_host":   {"EXEC_HOST", 11, func(j api.Job, _ time.Time) string { return dash(strings.Join(ExecHosts(j), ":")) }},
	"nexec_host":  {"NEXEC_HOST", 10, func(j api.Job, _ time.Time) string { return strconv.Itoa(len(ExecHosts(j))) }},
	"submit_time": {"SUBMIT_TIME", 15, func(j api.Job, now time.Time) string { return lsfTime(j.Submitted, lsfShortTime, now) }},
	"start_time":  {"START_TIME", 15, func(j api.Job, now time.Time) string { return lsfTime(j.Started, lsfShortTime, now) }},
	"finish_time": {"FINISH_TIME", 16, func(j api.Job, now time.Time) string { return lsfTime(j.Ended, lsfShortTime, now) }},
	"exit_code": {"EXIT_CODE", 10, func(j api.Job, _ time.Time) string {
		if j.State == api.JobCompleted { // LSF leaves DONE's empty
			return "-"
		}
		return dash(JobExitCode(j))
	}},
	"exit_reason": {"EXIT_REASON", 50, func(j api.Job, _ time.Time) string {
		if !j.State.Terminal() {
			return "-"
		}
		return dash(cell(j.Reason))
	}},
	"pend_reason": {"PEND_REASON", 11, func(j api.Job, _ time.Time) string {
		if j.State != api.JobPending && j.State != api.JobHeld {
			return "-"
		}
		return dash(cell(j.Reason))
	}},
	"slots":       {"SLOTS", 5, func(j api.Job, _ time.Time) string { return strconv.Itoa(slots(j)) }},
	"nreq_slot":   {"NREQ_SLOT", 9, func(j api.Job, _ time.Time) string { return strconv.Itoa(slots(j)) }},
	"nalloc_slot": {"NALLOC_SLOT", 11, func(j api.Job, _ time.Time) string { return strconv.Itoa(allocSlots(j)) }},
	"cpu_used":    {"CPU_USED", 10, func(j api.Job, _ time.Time) string { return lsfCPU(j) }},
	"mem":         {"MEM", 15, func(j api.Job, _ time.Time) string { return lsfMem(j) }},
	"run_time": {"RUN_TIME", 15, func(j api.Job, now time.Time) string {
		if j.Started.IsZero() {
			return "0 second(s)"
		}
		end := now
		if !j.Ended.IsZero() {
			end = j.Ended
		}
		return fmt.Sprintf("%d second(s)", int64(end.Sub(j.Started)/time.Second))
	}},
	"time_left": {"TIME_LEFT", 11, func(j api.Job, now time.Time) string {
		if j.Walltime <= 0 || j.Started.IsZero() || j.State.Terminal() {
			return "-"
		}
		left := max(j.Walltime-now.Sub(j.Started), 0)
		return fmt.Sprintf("%d:%02d L", int64(left/time.Hour), int64(left/time.Minute)%60)
	}},
	"runtimelimit": {"RUNTIMELIMIT", 12, func(j api.Job, _ time.Time) string {
		if j.Walltime <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f/-", j.Walltime.Minutes())
	}},
	"exec_cwd":    {"EXEC_CWD", 10, func(j api.Job, _ time.Time) string { return dash(j.Spec.Workdir) }},
	"sub_cwd":     {"SUB_CWD", 10, func(j api.Job, _ time.Time) string { return dash(j.Cwd) }},
	"output_file": {"OUTPUT_FILE", 11, func(j api.Job, _ time.Time) string { return dash(j.Spec.Output) }},
	"error_file":  {"ERROR_FILE", 10, func(j api.Job, _ time.Time) string { return dash(j.Spec.Error) }},
	"command":     {"COMMAND", 15, func(j api.Job, _ time.Time) string { return dash(cell(ShellJoin(j.Spec.MainCommand()))) }},
}

// slots are the cores the job asked for in all.
func slots(j api.Job) int {
	return int(float64(max(j.Spec.Cluster.Size, 1))*j.Spec.Resources.CPU + 0.999)
}

// allocSlots are the cores of its placed containers.
func allocSlots(j api.Job) int {
	var c float64
	for _, k := range j.Containers {
		if k.Node != "" {
			c += k.Resources.CPU
		}
	}
	if LSFState(j) == LSFPend || LSFState(j) == LSFPSusp {
		return 0
	}
	return int(c + 0.999)
}

// BjobsFieldNames are the fields -o takes, sorted.
func BjobsFieldNames() []string {
	var names []string
	for n := range bjobsFields {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

var (
	// ErrBjobsFormat is a bad bjobs -o string.
	ErrBjobsFormat = errors.New("bad -o format")

	// The regexps here are compiled on first use, not at the start of every
	// command that links this package (bsub starts in a few milliseconds).
	delimRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\s*delimiter\s*=\s*'([^']*)'\s*$`) })
	fieldRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([a-z_]+)(?::(-)?([0-9]+))?$`) })
)

// ParseBjobsFormat reads bjobs -o: "field[:[-]width] ... [delimiter='c']",
// fields separated by spaces, case-insensitive.
func ParseBjobsFormat(s string) ([]BjobsField, string, error) {
	delim := ""
	if m := delimRe().FindStringSubmatchIndex(s); m != nil {
		delim = s[m[2]:m[3]]
		s = s[:m[0]]
	}
	var fields []BjobsField
	for _, word := range strings.Fields(strings.ToLower(s)) {
		m := fieldRe().FindStringSubmatch(word)
		if m == nil {
			return nil, "", fmt.Errorf("%w: %q: want field[:[-]width]", ErrBjobsFormat, word)
		}
		if _, ok := bjobsFields[m[1]]; !ok {
			return nil, "", fmt.Errorf("%w: unknown field %q; fields: %s", ErrBjobsFormat, m[1], strings.Join(BjobsFieldNames(), " "))
		}
		f := BjobsField{Name: m[1], Right: m[2] == "-"}
		if m[3] != "" {
			f.Width, _ = strconv.Atoi(m[3])
		}
		fields = append(fields, f)
	}
	if len(fields) == 0 {
		return nil, "", fmt.Errorf("%w: no field", ErrBjobsFormat)
	}
	return fields, delim, nil
}

// WriteBjobsFields writes bjobs -o: each field padded to its width and
// a space (never cut: a longer value widens its line), or joined by
// delim when one is given.
func WriteBjobsFields(w io.Writer, jobs []api.Job, fields []BjobsField, delim string, header bool, now time.Time) error {
	var b strings.Builder
	line := func(vals []string) {
		for i, v := range vals {
			f := fields[i]
			width := f.Width
			if width == 0 {
				width = bjobsFields[f.Name].width
			}
			switch {
			case delim != "":
				if i > 0 {
					b.WriteString(delim)
				}
				b.WriteString(v)
			case f.Right:
				b.WriteString(strings.Repeat(" ", max(width-len([]rune(v)), 0)) + v + " ")
			default:
				b.WriteString(v + strings.Repeat(" ", max(width-len([]rune(v)), 0)) + " ")
			}
		}
		b.WriteString("\n")
	}
	if header {
		var hs []string
		for _, f := range fields {
			hs = append(hs, bjobsFields[f.Name].header)
		}
		line(hs)
	}
	for _, j := range jobs {
		var vs []string
		for _, f := range fields {
			vs = append(vs, bjobsFields[f.Name].value(j, now))
		}
		line(vs)
	}
	out := b.String()
	if delim == "" {
		out = trimLines(out)
	}
	_, err := io.WriteString(w, out)
	return err
}

// MatchName reports whether name matches LSF's -J pattern, where *
// stands for any characters.
func MatchName(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	var re strings.Builder
	re.WriteString("^")
	for i, p := range parts {
		if i > 0 {
			re.WriteString(".*")
		}
		re.WriteString(regexp.QuoteMeta(p))
	}
	re.WriteString("$")
	ok, _ := regexp.MatchString(re.String(), name)
	return ok
}

// EnvCluster names the cluster in LSF's answers (lsid, lsclusters);
// default DefaultCluster.
const (
	EnvCluster     = "TROUPE_CLUSTER"
	DefaultCluster = "troupe"
	// EnvLSFConfDir is the LSF_CONFDIR badmin showconf mbd reports, where
	// a site may keep lsbatch/CLUSTER/configdir/lsb.params for tools
	// that read it (Snakemake's LSF plugin reads DEFAULT_QUEUE there).
	EnvLSFConfDir     = "TROUPE_LSF_CONFDIR"
	DefaultLSFConfDir = "/etc/troupe/lsf"
	// LSFVersion is the LSF release whose commands troupe's follow.
	LSFVersion = "10.1.0"
)

// ClusterName is $TROUPE_CLUSTER, else "troupe".
func ClusterName() string {
	if n := os.Getenv(EnvCluster); n != "" {
		return n
	}
	return DefaultCluster
}

// MasterName is the host schedd answers at on addr: the host of a TCP
// address, this host for a unix socket.
func MasterName(addr string) string {
	first, _, _ := strings.Cut(addr, ",")
	first = strings.TrimPrefix(strings.TrimPrefix(first, "https://"), "http://")
	if strings.HasPrefix(first, "unix://") || strings.HasPrefix(first, "/") || first == "" {
		h, err := os.Hostname()
		if err != nil {
			return "localhost"
		}
		return h
	}
	if h, _, err := net.SplitHostPort(first); err == nil {
		return h
	}
	return first
}

// WriteLSID writes lsid's answer.
func WriteLSID(w io.Writer, cluster, master string) error {
	_, err := fmt.Fprintf(w, "troupe: LSF %s compatible commands\n\nMy cluster name is %s\nMy master name is %s\n",
		LSFVersion, cluster, master)
	return err
}

// WriteLSClusters writes lsclusters's table: the cluster, ok, its
// master, its admin, and its nodes (all servers).
func WriteLSClusters(w io.Writer, cluster, master string, nodes []api.Node, header bool) error {
	var b strings.Builder
	if header {
		fmt.Fprintf(&b, "%-14s %-8s %-25s %-8s %5s %8s\n", "CLUSTER_NAME", "STATUS", "MASTER_HOST", "ADMIN", "HOSTS", "SERVERS")
	}
	fmt.Fprintf(&b, "%-14s %-8s %-25s %-8s %5d %8d\n", cluster, "ok", master, "root", len(nodes), len(nodes))
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteShowconfMBD writes badmin showconf mbd: the LSF parameters troupe
// behaves by, "    NAME = value" lines under a dated heading.
func WriteShowconfMBD(w io.Writer, list api.PartitionList, now time.Time) error {
	confdir := os.Getenv(EnvLSFConfDir)
	if confdir == "" {
		confdir = DefaultLSFConfDir
	}
	def := ""
	for _, p := range list.Partitions {
		if p.Default {
			def = p.Name
		}
	}
	params := [][2]string{
		{"DEFAULT_QUEUE", dash(def)},
		{"LSB_SHAREDIR", "/var/lib/troupe/lsf"},
		{"LSF_CONFDIR", confdir},
		{"LSF_UNIT_FOR_LIMITS", "KB"},
		{"RESOURCE_RESERVE_PER_TASK", "Y"},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "MBD configuration at %s\n", now.Format("Mon Jan _2 15:04:05 2006"))
	for _, p := range params {
		fmt.Fprintf(&b, "    %s = %s\n", p[0], p[1])
	}
	_, err := io.WriteString(w, b.String())
	return err
}
