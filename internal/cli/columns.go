package cli

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// Column is one column bqueue can show: its header and how a job fills it.
type Column struct {
	Name  string // header, upper case: "JOBID"
	Help  string // one line for the usage text
	value func(j api.Job, now time.Time) string
}

// Value is what the column shows for j at now.
func (c Column) Value(j api.Job, now time.Time) string { return c.value(j, now) }

// Columns are every column bqueue knows, in the order -O help lists them.
var Columns = []Column{
	{"JOBID", "job id: 12[5] for an element of job array 12, 12[1-100] for the array", func(j api.Job, _ time.Time) string { return JobID(j) }},
	{"USER", "submitting user", func(j api.Job, _ time.Time) string { return j.User }},
	{"ACCOUNT", "fair-share account", func(j api.Job, _ time.Time) string { return JobAccount(j) }},
	{"PARTITION", "partition", func(j api.Job, _ time.Time) string { return j.Partition }},
	{"NAME", "job name", func(j api.Job, _ time.Time) string { return j.Name }},
	{"STATE", "job state (SUSPENDED: running, suspended)", func(j api.Job, _ time.Time) string { return QueueState(j) }},
	{"POS", "queue position of a pending job in its partition", func(j api.Job, _ time.Time) string { return QueuePosition(j) }},
	{"PRIORITY", "priority of a pending job", func(j api.Job, _ time.Time) string { return JobPriority(j) }},
	{"SIZE", "containers in the session", func(j api.Job, _ time.Time) string { return strconv.Itoa(JobSize(j)) }},
	{"NODES", "nodes its containers are on", func(j api.Job, _ time.Time) string { return strings.Join(JobNodes(j), ",") }},
	{"TIME", "run time, or time waiting", func(j api.Job, now time.Time) string { return Elapsed(JobTime(j, now)) }},
	{"REASON", "pending reason, why it is suspended, or end cause; a job array's elements by state", func(j api.Job, _ time.Time) string {
		if j.Array != nil {
			return ArrayCounts(j)
		}
		return JobReason(j)
	}},
	{"TIME_LIMIT", "walltime in force", func(j api.Job, _ time.Time) string { return TimeLimit(j) }},
	{"CPU", "cores per container", func(j api.Job, _ time.Time) string { return Number(j.Spec.Resources.CPU, 3) }},
	{"MEMORY", "GiB per container", func(j api.Job, _ time.Time) string { return GiB(j.Spec.Resources.Memory) }},
	{"GPU", "GPUs per container", func(j api.Job, _ time.Time) string {
		if j.Spec.Resources.GPU == 0 {
			return ""
		}
		return Number(j.Spec.Resources.GPU, 3)
	}},
	{"MODE", "single-node or multi-node", func(j api.Job, _ time.Time) string { return j.Spec.Cluster.Mode }},
	{"LICENSES", "licenses it holds while it runs: name:count,…", func(j api.Job, _ time.Time) string { return Licenses(j.Licenses) }},
	{"IMAGE", "image", func(j api.Job, _ time.Time) string { return j.Spec.Image }},
	{"SUBMIT_TIME", "when it was submitted", func(j api.Job, now time.Time) string { return Timestamp(j.Submitted, now.Location()) }},
	{"START_TIME", "when it started, or the expected start", func(j api.Job, now time.Time) string {
		if j.Started.IsZero() && j.State == api.JobPending {
			return Timestamp(j.EstimatedStart, now.Location())
		}
		return Timestamp(j.Started, now.Location())
	}},
	{"END_TIME", "when it ended", func(j api.Job, now time.Time) string { return Timestamp(j.Ended, now.Location()) }},
	{"EXIT_CODE", "main1's exit code, once ended", func(j api.Job, _ time.Time) string { return JobExitCode(j) }},
	{"SESSION_ID", "session UUID", func(j api.Job, _ time.Time) string { return j.SessionID }},
	{"CWD", "submit directory", func(j api.Job, _ time.Time) string { return j.Cwd }},
}

// Column sets of bqueue's table, -o wide and --start.
var (
	QueueColumns = []string{"JOBID", "POS", "USER", "ACCOUNT", "PARTITION", "NAME", "STATE", "SIZE", "NODES", "TIME", "REASON"}
	WideColumns  = append(slices.Clone(QueueColumns), "PRIORITY", "TIME_LIMIT", "CPU", "MEMORY", "GPU", "MODE", "LICENSES", "SUBMIT_TIME", "START_TIME")
)

// LookupColumns returns the named columns. Names are case-insensitive and
// separated by commas or spaces, as Slurm's squeue -O and LSF's bjobs -o
// take them; LSF's and Slurm's names for the common ones work too
// ("jobid", "stat", "queue", "job_name", "nodelist", "reason"…).
func LookupColumns(spec string) ([]Column, error) {
	names := strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	if len(names) == 0 {
		return nil, fmt.Errorf("no columns given; known: %s", strings.ToLower(strings.Join(ColumnNames(), ",")))
	}
	var out []Column
	for _, n := range names {
		c, ok := column(n)
		if !ok {
			return nil, fmt.Errorf("unknown column %q; known: %s", n, strings.ToLower(strings.Join(ColumnNames(), ",")))
		}
		out = append(out, c)
	}
	return out, nil
}

// ColumnNames lists every column's name.
func ColumnNames() []string {
	names := make([]string, len(Columns))
	for i, c := range Columns {
		names[i] = c.Name
	}
	return names
}

// columnAliases are LSF bjobs -o and Slurm squeue -O names.
var columnAliases = map[string]string{
	"ID": "JOBID", "JOB_ID": "JOBID", "STAT": "STATE", "QUEUE": "PARTITION", "JOB_NAME": "NAME",
	"NODELIST": "NODES", "EXEC_HOST": "NODES", "NUMNODES": "SIZE", "NUMTASKS": "SIZE", "NREQ_SLOT": "SIZE",
	"RUN_TIME": "TIME", "TIMEUSED": "TIME", "PEND_REASON": "REASON", "TIMELIMIT": "TIME_LIMIT",
	"RUNTIMELIMIT": "TIME_LIMIT", "SUBMITTIME": "SUBMIT_TIME", "STARTTIME": "START_TIME", "ENDTIME": "END_TIME",
	"FINISH_TIME": "END_TIME", "EXITCODE": "EXIT_CODE", "EXIT": "EXIT_CODE", "PROJECT": "ACCOUNT",
	"WORKDIR": "CWD", "SUB_CWD": "CWD", "PRIO": "PRIORITY", "POSITION": "POS", "QUEUE_POSITION": "POS",
	"LICENSE": "LICENSES",
}

func column(name string) (Column, bool) {
	n := strings.ToUpper(strings.TrimSpace(name))
	if a, ok := columnAliases[n]; ok {
		n = a
	}
	for _, c := range Columns {
		if c.Name == n {
			return c, true
		}
	}
	return Column{}, false
}

// MustColumns is LookupColumns for names known to be valid.
func MustColumns(names []string) []Column {
	cols, err := LookupColumns(strings.Join(names, ","))
	if err != nil {
		panic(err)
	}
	return cols
}

// WriteJobColumns writes jobs, in the order given, as a table of cols.
func WriteJobColumns(w io.Writer, jobs []api.Job, cols []Column, now time.Time) error {
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = c.Name
	}
	t := NewTable(w, header...)
	for _, j := range jobs {
		row := make([]string, len(cols))
		for i, c := range cols {
			row[i] = c.Value(j, now)
		}
		t.Row(row...)
	}
	return t.Flush()
}

// JobAccount is the account a job is charged to: the one schedd resolved
// at submit, else the one its file names.
func JobAccount(j api.Job) string {
	if j.Account != "" {
		return j.Account
	}
	return j.Spec.Account
}

// TimeLimit shows the walltime in force: schedd's (the job's or the
// partition default), else the job file's; "UNLIMITED" when neither.
func TimeLimit(j api.Job) string {
	switch {
	case j.Walltime > 0:
		return Elapsed(j.Walltime)
	case j.Spec.Walltime > 0:
		return Elapsed(j.Spec.Walltime)
	}
	return "UNLIMITED"
}

// QueuePosition is a pending job's place in its partition's queue, ""
// when unknown (not pending, or not yet ranked by schedd).
func QueuePosition(j api.Job) string {
	if j.State != api.JobPending || j.QueuePosition <= 0 {
		return ""
	}
	return strconv.Itoa(j.QueuePosition)
}

// JobPriority is a pending job's priority, rounded; "" when unknown.
func JobPriority(j api.Job) string {
	if j.State != api.JobPending || j.PriorityFactors == nil {
		return ""
	}
	return Number(j.Priority, 0)
}

// JobExitCode is the exit code bjob, bqueue and bhist show for a job
// ("" none): see ExitCode.
func JobExitCode(j api.Job) string {
	var main1 api.ContainerState
	var code int
	if len(j.Containers) > 0 {
		main1, code = j.Containers[0].State, j.Containers[0].ExitCode
	}
	return ExitCode(j.State, j.ExitCode, main1, code)
}

// HistoryExitCode is JobExitCode for an ended job of bhist.
func HistoryExitCode(j api.HistoryJob) string {
	var main1 api.ContainerState
	var code int
	if len(j.Containers) > 0 {
		main1, code = j.Containers[0].State, j.Containers[0].ExitCode
	}
	return ExitCode(j.State, j.ExitCode, main1, code)
}

// ExitCode is the one rule every view follows for a job's exit code, as
// LSF shows it: a job that ran to its end (COMPLETED, FAILED) has its
// own; a job whose main1 was stopped (TIMEOUT, a bkill, a lost node that
// still reported it) has the code main1 ended with, 128 plus the signal
// that stopped it, as LSF says "Exited with exit code 140" of a job
// killed at its run limit; a job not ended, or whose main1 never ran to
// an end, has none ("").
func ExitCode(st api.JobState, jobCode int, main1 api.ContainerState, main1Code int) string {
	switch {
	case st == api.JobCompleted || st == api.JobFailed:
		return strconv.Itoa(jobCode)
	case !st.Terminal():
		return ""
	case main1 == api.ContainerExited || main1 == api.ContainerOOM || main1 == api.ContainerKilled:
		return strconv.Itoa(main1Code)
	}
	return ""
}

// JobFilter selects jobs as bqueue's and bkill's -u, -p, -s, -A do. Empty
// fields match everything; a list matches any of its values.
type JobFilter struct {
	Users      []string // "all" matches everyone
	Partitions []string
	Accounts   []string
	States     []api.JobState
	Names      []string
	Ended      bool // include ended jobs even when States names none
}

// Match reports whether j passes the filter.
func (f JobFilter) Match(j api.Job) bool {
	if j.State.Terminal() && !f.Ended && !slices.Contains(f.States, j.State) {
		return false
	}
	in := func(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }
	return (in(f.Users, j.User) || slices.Contains(f.Users, "all")) && in(f.Partitions, j.Partition) && in(f.Accounts, JobAccount(j)) &&
		in(f.Names, j.Name) && (len(f.States) == 0 || slices.Contains(f.States, j.State) ||
		j.Suspended != nil && slices.Contains(f.States, JobSuspended))
}

// Filter returns the jobs that pass, in the order given (never nil).
func (f JobFilter) Filter(jobs []api.Job) []api.Job {
	out := []api.Job{}
	for _, j := range jobs {
		if f.Match(j) {
			out = append(out, j)
		}
	}
	return out
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// JobSuspended is not one of troupe's job states: in a state filter it
// picks the running jobs whose containers are frozen (a preemption in
// suspend mode, badmin jsuspend), which Slurm shows as S (SUSPENDED) and
// LSF as SSUSP. They stay RUNNING, and a filter naming RUNNING picks
// them too.
const JobSuspended api.JobState = "SUSPENDED"

// stateAliases are LSF's and Slurm's short state names.
var stateAliases = map[string]api.JobState{
	"PD": api.JobPending, "PEND": api.JobPending, "PSUSP": api.JobHeld, "HOLD": api.JobHeld, "RH": api.JobHeld,
	"R": api.JobRunning, "RUN": api.JobRunning, "CF": api.JobPreparing, "CONFIGURING": api.JobPreparing,
	"S": JobSuspended, "SUSPENDED": JobSuspended, "SSUSP": JobSuspended, "CD": api.JobCompleted, "DONE": api.JobCompleted, "F": api.JobFailed,
	"EXIT": api.JobFailed, "CA": api.JobCancelled, "TO": api.JobTimeout, "NF": api.JobNodeFail,
	"PR": api.JobPreempted,
}

// AllStates are the job states, in lifecycle order.
var AllStates = []api.JobState{api.JobPending, api.JobHeld, api.JobScheduled, api.JobPreparing, api.JobRunning,
	api.JobCompleted, api.JobFailed, api.JobCancelled, api.JobTimeout, api.JobNodeFail, api.JobPreempted}

// ParseStates reads a comma-separated list of job states: the full names
// (case-insensitive), LSF's (PEND, RUN, SSUSP, DONE, EXIT) or Slurm's
// short codes (PD, R, S, CD, F, CA, TO, NF, PR); SUSPENDED, S and SSUSP
// are JobSuspended.
func ParseStates(s string) ([]api.JobState, error) {
	var out []api.JobState
	for _, p := range SplitList(s) {
		u := strings.ToUpper(p)
		st, ok := stateAliases[u]
		if !ok && slices.Contains(AllStates, api.JobState(u)) {
			st, ok = api.JobState(u), true
		}
		if !ok {
			names := make([]string, len(AllStates))
			for i, a := range AllStates {
				names[i] = string(a)
			}
			return nil, fmt.Errorf("unknown job state %q; use %s (or LSF's PEND, RUN, SSUSP, DONE, EXIT, or Slurm's PD, R, S, CD, F, CA, TO, NF, PR)", p, orList(names))
		}
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no job state given")
	}
	return out, nil
}
