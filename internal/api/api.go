// Package api holds the wire types of schedd's HTTP/JSON /v1 API, shared by
// schedd, nodelet and the command-line tools: the views schedd answers
// with, never what it stores. schedd's replicated rows are sched/state's
// (state.Job, state.Node); schedd builds these views from them in one
// place (sched/view.go), adding what it derives for the answer. The
// package imports nothing from sched, nodelet or cmd.
//
// Endpoints (all JSON; errors are {"error": "..."} with a 4xx/5xx status):
//
//	POST /v1/jobs                      SubmitRequest → SubmitResponse (X-Troupe-Index: where it was stored)
//	POST /v1/jobs/check                SubmitRequest → SubmitCheck (submit's checks, nothing stored: bsub --dry-run)
//	POST /v1/jobs/batch                SubmitBatch → SubmitBatchResponse (several jobs, one raft entry: all or none)
//	GET  /v1/jobs[?index=N&wait=30s]   → JobList (blocking when index given)
//	GET  /v1/jobs/{id}                 → Job
//	POST /v1/jobs/{id}/kill            → Job (?done=true: bkill -d, the job ends COMPLETED)
//	POST /v1/jobs/{id}/signal          SignalJob → Job (bkill -s: a running job's containers get the signal)
//	GET  /v1/history[?user=U&limit=N…] → History (ended jobs, with usage and events; bhist)
//	POST /v1/jobs/{id}/hold            {} → Job (a pending job becomes HELD; 409 otherwise)
//	POST /v1/jobs/{id}/release         {} → Job (a held job becomes PENDING; 409 otherwise)
//	POST /v1/jobs/{id}/attach[?host=H] Upgrade: troupe-attach → 101, then the
//	                                   terminal stream of an interactive job (package attach)
//	GET  /v1/nodes                     → NodeList
//	POST /v1/nodes/register            NodeRegister → NodeRegistered (the Node and its NodeLease)
//	POST /v1/nodes/{name}/heartbeat    [NodeHeartbeat] → NodeLease (409: another instance holds the name)
//	GET  /v1/nodes/{name}/assignments?index=N&wait=30s → Assignments
//	POST /v1/nodes/{name}/status       ContainerReport → {}
//	GET  /v1/nodes/{name}/attach?wait=30s → AttachRequests (blocking)
//	POST /v1/nodes/{name}/attach/{id}  Upgrade: troupe-attach → 101: the nodelet's
//	                                   end of attach request id
//	GET  /v1/partitions                → PartitionList
//	GET  /v1/fairshare                 → FairShareList
//	GET  /v1/snapshot                  → snapshot file (badmin snapshot save)
//	POST /v1/snapshot                  snapshot file → SnapshotRestored
//	GET  /v1/openapi.json              → the OpenAPI 3 document of this API
//	POST /v1/reconfig                  {} → ReconfigResponse (schedd re-reads its partitions file)
//	POST /v1/nodes/drain               NodeDrain → NodeList (admins; drain or resume nodes)
//	GET  /v1/reservations              → ReservationList (reservation.go)
//	ANY  /apps/{id}/{service}/…        the job's service (its owner or an admin), proxied
//	                                   through the nodelet of main1 (HTTP, WebSocket)
//
// A job array is one job (its id, Job.Array); {id} may also name one of
// its elements, "12[5]" (URL-escaped: 12%5B5%5D), for GET, kill, hold,
// release, signal and attach. GET /v1/jobs?array=12 lists the array's
// elements in index order, those that have not come up yet too (bqueue
// --array).
//
// Blocking queries: the response carries header X-Troupe-Index; a request
// with ?index=N waits (up to wait) until the state index exceeds N.
//
// Of troupe it imports only leaf packages (lifecycle, arrayindex,
// outpattern, units, reason): not jobspec (a job's spec has its own wire
// type here, JobSpec, so that the tools never link the job file's HCL
// parser), and never sched/... or nodelet/... (cmd/layout_test.go
// checks).
package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/arrayindex"
	"github.com/troupe-hpc/troupe/internal/lifecycle"
	"github.com/troupe-hpc/troupe/internal/outpattern"
	"github.com/troupe-hpc/troupe/internal/reason"
	"github.com/troupe-hpc/troupe/internal/units"
)

// IndexHeader carries the state index a response reflects.
const IndexHeader = "X-Troupe-Index"

// RequestHeader carries a write's request id: the client sends the same
// id with every retry of one request, and schedd applies it at most once
// (submit, kill, hold, release, signal), answering a repeat as it
// answered the first.
const RequestHeader = "X-Troupe-Request"

// OutcomeHeader marks an error answer to a write: OutcomeNotApplied (the
// write never reached the log; sending it again anywhere is safe) or
// OutcomeUnknown (it reached the log of a leader that lost office or
// stopped before it knew the entry committed: it may have taken effect).
const OutcomeHeader = "X-Troupe-Outcome"

// Values of OutcomeHeader.
const (
	OutcomeNotApplied = "not-applied"
	OutcomeUnknown    = "unknown"
)

// JobState is where a job stands in its lifecycle (docs/ARCHITECTURE.md,
// "The life of a job"; bqueue(1), STATE): package lifecycle's, which the
// replicated state's rows store too.
type JobState = lifecycle.JobState

// Job states.
const (
	JobPending   = lifecycle.JobPending
	JobHeld      = lifecycle.JobHeld
	JobScheduled = lifecycle.JobScheduled
	JobPreparing = lifecycle.JobPreparing
	JobRunning   = lifecycle.JobRunning
	JobCompleted = lifecycle.JobCompleted
	JobFailed    = lifecycle.JobFailed
	JobCancelled = lifecycle.JobCancelled
	JobTimeout   = lifecycle.JobTimeout
	JobNodeFail  = lifecycle.JobNodeFail
	JobPreempted = lifecycle.JobPreempted
	JobRequeued  = lifecycle.JobRequeued
)

// Pending reasons, as Slurm names them (package reason defines them;
// these names stay for the API's users).
const (
	ReasonResources                = reason.Resources
	ReasonPriority                 = reason.Priority
	ReasonPartitionLimit           = reason.PartitionLimit
	ReasonAccountLimit             = reason.AccountLimit
	ReasonDependency               = reason.Dependency
	ReasonHeld                     = reason.Held
	ReasonDependencyNeverSatisfied = reason.DependencyNeverSatisfied
	ReasonArrayTaskLimit           = reason.ArrayTaskLimit
	ReasonLicenses                 = reason.Licenses
)

// ContainerState is where one container of a session stands (package
// lifecycle's).
type ContainerState = lifecycle.ContainerState

// Container states.
const (
	ContainerPending   = lifecycle.ContainerPending
	ContainerAssigned  = lifecycle.ContainerAssigned
	ContainerPreparing = lifecycle.ContainerPreparing
	ContainerRunning   = lifecycle.ContainerRunning
	ContainerExited    = lifecycle.ContainerExited
	ContainerFailed    = lifecycle.ContainerFailed
	ContainerKilled    = lifecycle.ContainerKilled
	ContainerOOM       = lifecycle.ContainerOOM
)

// SubmitRequest is what bsub sends.
type SubmitRequest struct {
	Spec   JobSpec `json:"spec"`
	Cwd    string  `json:"cwd"`            // submit directory; relative output paths resolve here
	User   string  `json:"user,omitempty"` // informational; schedd trusts UID/GID
	UID    int     `json:"uid"`
	GID    int     `json:"gid"`
	Source string  `json:"source,omitempty"` // job file name, for messages
	// JobFile is a job file's text, which schedd parses in place of
	// Spec (leave Spec out): for clients that cannot read HCL. Source
	// names it in errors (file:line:col) and picks the syntax, HCL's
	// JSON when it ends in ".json"; Vars set its variables as
	// bsub -var does.
	JobFile string            `json:"job_file,omitempty"`
	Vars    map[string]string `json:"vars,omitempty"`
	// RequestID makes a submission idempotent: a retry with the same id
	// (the client's, after a lost answer or a leader change) gets the
	// job the first try made instead of a second one.
	RequestID string `json:"request_id,omitempty"`
	// Hold submits the job HELD (bsub -H): it waits until released.
	Hold bool `json:"hold,omitempty"`
	// Admin is set by schedd, never read from the body: the submitter
	// is an admin (every reservation admits admins' jobs).
	Admin bool `json:"-"`
	// DependsOn makes the job wait for other jobs (bsub -w); see depend.go.
	DependsOn *Dependency `json:"depends_on,omitempty"`
	// Interactive (bsub -I) runs main1's command on a terminal that the
	// submitter attaches to through schedd (POST /v1/jobs/{id}/attach).
	Interactive bool `json:"interactive,omitempty"`
	// Positions says where Source wrote each setting of Spec, keyed by
	// its JSON path as jobspec.Job.Ranges is ("walltime",
	// "cluster.size", "resources.cpu"): schedd's refusals then name the
	// file's line and column. A setting a flag changed has none. Only
	// read for the refusal's words; never stored.
	Positions map[string]SourcePos `json:"positions,omitempty"`
}

// SourcePos is a place in a job file: line and column from 1.
type SourcePos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

// MaxPositions bounds the positions a client sends (jobspec.PositionsOf):
// about 40 bytes each on the wire, a few dozen for a usual job file. A job of more
// settings (thousands of env entries) is sent without any, so that they
// never push a request past schedd's body limit; its refusals are then
// unplaced.
const MaxPositions = 4096

// SubmitResponse answers a submission.
type SubmitResponse struct {
	JobID     uint64 `json:"job_id"`
	Partition string `json:"partition"`
	// Index is the state index (IndexHeader) at which the job was
	// stored: a blocking query for an index below it waits on a lagging
	// peer until that peer holds the job.
	Index uint64 `json:"-"`
}

// MaxSubmitBatch bounds the jobs of one SubmitBatch; bsub sends more in
// several.
const MaxSubmitBatch = 1000

// SubmitBatch submits several jobs at once (bsub --count, bsub a.hcl
// b.hcl): schedd checks each as POST /v1/jobs would, the jobs ahead of it
// in the batch counted against the queue limits, then stores all of them
// in one raft entry with consecutive ids, or refuses the whole batch
// naming the first job it refuses. Each job's RequestID makes it
// idempotent as a single submit's does; a job without one is given the
// batch's request id (the X-Troupe-Request header) with "/N" appended, N its
// place from 1.
type SubmitBatch struct {
	Jobs []SubmitRequest `json:"jobs"`
}

// SubmitBatchResponse answers a SubmitBatch: one SubmitResponse per job,
// in the order of the request.
type SubmitBatchResponse struct {
	Jobs []SubmitResponse `json:"jobs"`
}

// SubmitCheck answers POST /v1/jobs/check (bsub --dry-run): submit's
// checks passed, nothing was stored; where the job would go.
type SubmitCheck struct {
	Partition string `json:"partition"`
	Account   string `json:"account"`
	// Walltime is the job's limit: its own, else the partition's
	// default.
	Walltime time.Duration `json:"walltime,omitempty"`
	// Notes say what may keep the job pending once submitted (its
	// partition has no nodes now, or less than it needs).
	Notes []string `json:"notes,omitempty"`
}

// Job is a job as the API shows it: the view schedd builds from its row
// (sched/state.Job), plus what the leader works out for the answer
// (EstimatedStart, Priority, PriorityFactors, QueuePosition,
// QueueLength), which no row holds.
type Job struct {
	ID        uint64        `json:"id"`
	SessionID string        `json:"session_id"`           // equals main1's kernel id
	RequestID string        `json:"request_id,omitempty"` // the submission's idempotency key
	Network   *Network      `json:"network,omitempty"`
	Name      string        `json:"name"`
	User      string        `json:"user"`
	UID       int           `json:"uid"`
	GID       int           `json:"gid"`
	Cwd       string        `json:"cwd"`
	Partition string        `json:"partition"`
	Account   string        `json:"account,omitempty"`  // fair-share account, resolved at submit
	Walltime  time.Duration `json:"walltime,omitempty"` // the limit in force: the job's, else the partition default; 0 none
	// Reservation names the reservation the job runs in ("" none).
	Reservation string  `json:"reservation,omitempty"`
	Spec        JobSpec `json:"spec"`
	// Licenses are the site-wide licenses the job holds while it runs,
	// by name, as admitted.
	Licenses map[string]int `json:"licenses,omitempty"`
	// Interactive: main1's command runs on a terminal (bsub -I, battach).
	Interactive bool     `json:"interactive,omitempty"`
	State       JobState `json:"state"`
	Reason      string   `json:"reason,omitempty"`      // pending reason or end cause
	ExitCode    int      `json:"exit_code"`             // main1's, once ended
	KillWanted  bool     `json:"kill_wanted,omitempty"` // bkill or session end: nodelets stop containers
	Cancelled   bool     `json:"cancelled,omitempty"`   // bkill asked for it; the job ends CANCELLED
	// KillDone: bkill -d asked for it; the job ends COMPLETED, not
	// CANCELLED (LSF's "kill and record as DONE").
	KillDone bool `json:"kill_done,omitempty"`
	TimedOut bool `json:"timed_out,omitempty"` // ran past its walltime; the job ends TIMEOUT
	// Requeues counts the times a node failure put the job back in the
	// queue; LastRequeue says why the last time.
	Requeues    int    `json:"requeues,omitempty"`
	LastRequeue string `json:"last_requeue,omitempty"`
	// ExcludeNodes are nodes the job is not placed on again: a node
	// whose health check failed while the job ran there.
	ExcludeNodes []string `json:"exclude_nodes,omitempty"`
	// Runs are the runs a requeue ended, oldest first (Runs[i] is run
	// i); the job's own times, exit code, usage and containers are its
	// current run's.
	Runs        []JobRun    `json:"runs,omitempty"`
	Containers  []Container `json:"containers"`
	Submitted   time.Time   `json:"submitted"`
	Started     time.Time   `json:"started,omitzero"`
	Ended       time.Time   `json:"ended,omitzero"`
	ModifyIndex uint64      `json:"modify_index"`
	// QOS is the job's quality of service, resolved at submit ("": none).
	QOS string `json:"qos,omitempty"`
	// Preempt is the job's last preemption: which job it was stopped
	// for, when, and how.
	Preempt *Preemption `json:"preempt,omitempty"`
	// Preempted are the jobs this one preempted to start, in order.
	Preempted []uint64 `json:"preempted,omitempty"`
	// EstimatedStart is when a pending job that holds a backfill
	// reservation is expected to start. The scheduler recomputes it on
	// every pass (it is not in the raft log); zero when unknown.
	EstimatedStart time.Time `json:"estimated_start,omitzero"`
	// Priority, PriorityFactors, QueuePosition and QueueLength describe a
	// PENDING job as the last scheduling pass ranked it: leader-local and
	// recomputed on every pass like EstimatedStart, never in the raft log;
	// zero (absent) for other jobs and before the first pass sees the job.
	Priority        float64          `json:"priority,omitempty"`
	PriorityFactors *PriorityFactors `json:"priority_factors,omitempty"`
	// QueuePosition is the job's 1-based place among the PENDING jobs of
	// its partition, in the order the scheduler considers them (jobs a
	// limit keeps out come last); QueueLength is how many there are.
	QueuePosition int `json:"queue_position,omitempty"`
	QueueLength   int `json:"queue_length,omitempty"`
	// DependsOn is what the job waits for (bsub -w); answers fill in
	// each condition's status.
	DependsOn *Dependency `json:"depends_on,omitempty"`
	// Signals are the signal requests (bkill -s) made while it ran, in
	// order: Seq is the position + 1. Nodelets deliver each once.
	Signals []SignalRequest `json:"signals,omitempty"`
	// Mailed are the mail events (MailBegin of a run, MailEnd) schedd
	// has taken on for the job's Spec.Mail: each is sent at most once.
	Mailed []string `json:"mailed,omitempty"`
	// Suspended is set while the running job is suspended (bjobs SSUSP,
	// squeue S); SuspendedFor sums its current run's ended suspensions.
	// Warned is when its warning signal (Spec.Signal) was sent in this
	// run (zero: not yet).
	Suspended    *Suspension   `json:"suspended,omitempty"`
	SuspendedFor time.Duration `json:"suspended_for,omitempty"`
	Warned       time.Time     `json:"warned,omitzero"`
	// CPUTime and MemPeak sum its containers' usage as they ended.
	CPUTime time.Duration `json:"cpu_time,omitempty"`
	MemPeak int64         `json:"mem_peak,omitempty"`
	// Array is set on a job array's own row (the id bsub answered): its
	// elements and how many stand in each state. The row runs nothing;
	// its state sums its elements' (see Array).
	Array *Array `json:"array,omitempty"`
	// ArrayID is set on an element of a job array: the array's id;
	// ArrayIndex is the element's index and ArraySpan its array's
	// bounds (for the element's environment). Users name the element
	// ArrayID[ArrayIndex] ("12[5]").
	ArrayID    uint64     `json:"array_id,omitempty"`
	ArrayIndex int        `json:"array_index,omitempty"`
	ArraySpan  *ArraySpan `json:"array_span,omitempty"`
}

// Array is a job array's own record. Its elements get job rows of their
// own (ids from the same counter as jobs) only as they come up: at most
// ArrayWindow pending at once (and no more than max_running allows),
// so that an array of 100,000 costs one row until it runs. States
// counts every element by state, an element without a row yet as
// PENDING (or HELD while the array is held), so the counts add up to
// Count.
//
// The array's own State is derived: COMPLETED once every element has,
// else once every element ended CANCELLED if it was killed, FAILED
// otherwise; RUNNING while an element is started; HELD while held with
// nothing started; PENDING otherwise.
type Array struct {
	Indices    arrayindex.Indices `json:"indices"`
	Count      int                `json:"count"`
	MaxRunning int                `json:"max_running,omitempty"` // 0: no limit
	States     map[JobState]int   `json:"states"`
	// Next is how many elements, in index order, have had their turn to
	// get a row; Early lists the indices beyond that got one before
	// their turn (held or killed by name).
	Next  int   `json:"next"`
	Early []int `json:"early,omitempty"`
	// Held: the whole array was held (bhold 12): no element gets a row
	// or starts until it is released.
	Held bool `json:"held,omitempty"`
}

// ArraySpan is what an element knows of its array (LSB_JOBINDEX_END,
// SLURM_ARRAY_TASK_MIN/MAX/COUNT/STEP).
type ArraySpan struct {
	Min   int `json:"min"`
	Max   int `json:"max"`
	Count int `json:"count"`
	Step  int `json:"step"`
}

// Started counts the array's elements placed and not ended.
func (a *Array) Started() int {
	return a.States[JobScheduled] + a.States[JobPreparing] + a.States[JobRunning]
}

// Unmade counts the array's elements that have no row yet.
func (a *Array) Unmade() int { return a.Count - a.Next - len(a.Early) }

// Ended counts the array's elements that ended.
func (a *Array) Ended() int {
	n := 0
	for s, k := range a.States {
		if s.Terminal() {
			n += k
		}
	}
	return n
}

// JobRef names a job, or one element of a job array: "12" or "12[5]".
type JobRef struct {
	ID    uint64
	Index int
	// Element: the reference names element Index of array ID.
	Element bool
}

func (r JobRef) String() string {
	if r.Element {
		return fmt.Sprintf("%d[%d]", r.ID, r.Index)
	}
	return strconv.FormatUint(r.ID, 10)
}

// ParseJobRef reads "12" or "12[5]".
func ParseJobRef(s string) (JobRef, error) {
	s = strings.TrimSpace(s)
	id, rest, element := strings.Cut(s, "[")
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 {
		return JobRef{}, fmt.Errorf("job id %q is not a positive number, nor an array element such as 12[5]", s)
	}
	r := JobRef{ID: n}
	if element {
		idx, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
		if !strings.HasSuffix(rest, "]") || err != nil || idx < 0 {
			return JobRef{}, fmt.Errorf("job id %q: want an array element such as 12[5]", s)
		}
		r.Index, r.Element = idx, true
	}
	return r, nil
}

// Ref is how users name j: "12", or "12[5]" for an element.
func (j *Job) Ref() string {
	if j.ArrayID != 0 {
		return JobRef{ID: j.ArrayID, Index: j.ArrayIndex, Element: true}.String()
	}
	return strconv.FormatUint(j.ID, 10)
}

// OutputVars are what the escapes of j's output and error patterns
// stand for in its container host: j.Spec.OutputPath(j.OutputVars(host))
// is where that container's output goes.
func (j *Job) OutputVars(host string) outpattern.Vars {
	return outpattern.Vars{JobID: j.ID, ArrayID: j.ArrayID, ArrayIndex: j.ArrayIndex, Host: host, User: j.User, Cwd: j.Cwd}
}

// Container returns j's container named host; false if it has none.
func (j *Job) Container(host string) (Container, bool) {
	for _, c := range j.Containers {
		if c.Host == host {
			return c, true
		}
	}
	return Container{}, false
}

// PriorityFactors break a pending job's priority into its weighted
// contributions (Slurm sprio): Total = Age + FairShare + JobSize +
// Partition + Nice, where Nice is ≤ 0.
type PriorityFactors struct {
	Age       float64 `json:"age"`
	FairShare float64 `json:"fair_share"`
	JobSize   float64 `json:"job_size"`
	Partition float64 `json:"partition"`
	Nice      float64 `json:"nice"`
	Total     float64 `json:"total"`
}

// Container is one container of a job's session.
type Container struct {
	ContainerSpec
	// CPUMilli is the container's CPU in millicores as admission
	// resolved it and the scheduler placed it: what its node enforces
	// (the CFS quota) and counts. A schedd older than the field sends
	// none; Milli reads such a container.
	CPUMilli int64          `json:"cpu_milli,omitempty"`
	KernelID string         `json:"kernel_id"`
	Node     string         `json:"node,omitempty"`
	NodeAddr string         `json:"node_addr,omitempty"` // address other containers reach it at
	Addr     string         `json:"addr,omitempty"`      // the container's address on its session network
	Reach    string         `json:"reach,omitempty"`     // on its node's routed default network, for the submit hosts and its user's other containers ("": NAT only)
	State    ContainerState `json:"state"`
	ExitCode int            `json:"exit_code"`
	Message  string         `json:"message,omitempty"`
	// GPUs are the device shares the container holds on its node (nil
	// without GPUs, or on a node that reported no devices). The nodelet
	// enforces them: CUDA_VISIBLE_DEVICES and MPS limits.
	GPUs []GPUShare `json:"gpus,omitempty"`
	// CPUTime (user + system) and MemPeak (bytes) are what the container
	// used, reported by its nodelet when it ended.
	CPUTime time.Duration `json:"cpu_time,omitempty"`
	MemPeak int64         `json:"mem_peak,omitempty"`
	// Ended is when it ended, as its node measured it (on schedd's
	// clock, within the run); zero until then, or when no node told.
	Ended time.Time `json:"ended,omitzero"`
}

// Milli is c's CPU in millicores: CPUMilli, or, from a schedd that
// predates it, the job file's cores rounded to the nearest millicore as
// admission rounds them.
func (c *Container) Milli() int64 {
	if c.CPUMilli != 0 || c.Resources.CPU <= 0 {
		return c.CPUMilli
	}
	return units.MilliCPU(c.Resources.CPU)
}

// JobRun is an earlier run of a requeued job, as the requeue ended it.
type JobRun struct {
	Started  time.Time     `json:"started,omitzero"` // zero: it never started
	Ended    time.Time     `json:"ended"`            // when the requeue ended it
	Reason   string        `json:"reason"`           // why it was requeued
	ExitCode int           `json:"exit_code"`        // main1's, when it had ended
	CPUTime  time.Duration `json:"cpu_time,omitempty"`
	MemPeak  int64         `json:"mem_peak,omitempty"`
	// Containers are its containers as the run ended: the node each
	// ran on, its state, exit code and usage.
	Containers []HistoryContainer `json:"containers"`
}

// Preemption is a running job stopped (or suspended) for a pending one.
type Preemption struct {
	By   uint64    `json:"by"`   // the job it was preempted for
	At   time.Time `json:"at"`   // when the scheduler chose it
	Mode string    `json:"mode"` // cancel, requeue or suspend
	Run  int       `json:"run"`  // the run it stopped (the job's Requeues then)
	// Resumed is when a job suspended by it resumed (zero: not yet).
	Resumed time.Time `json:"resumed,omitzero"`
	// Reservation: stopped as this reservation's window opened (its flag
	// stop_jobs), By then 0.
	Reservation string `json:"reservation,omitempty"`
}

// GPUShare is a slice of one GPU device of a node.
type GPUShare struct {
	Device int     `json:"device"` // node-local index, the CUDA_VISIBLE_DEVICES ordinal
	Share  float64 `json:"share"`  // (0, 1]; 1 is the whole device
}

// Network is a session's private network, allocated by schedd: a Linux
// bridge when the session sits on one node, a VXLAN overlay (VNI) between
// its nodes otherwise. Container i has address Containers[i].Addr in
// Subnet.
type Network struct {
	VNI    uint32 `json:"vni"`
	Subnet string `json:"subnet"` // CIDR, e.g. 10.64.0.0/24
}

// JobList is the queue.
type JobList struct {
	Jobs  []Job  `json:"jobs"`
	Index uint64 `json:"index"`
}

// NodeState is a node's health (package lifecycle's).
type NodeState = lifecycle.NodeState

// Node states.
const (
	NodeUp       = lifecycle.NodeUp
	NodeDown     = lifecycle.NodeDown
	NodeDraining = lifecycle.NodeDraining
	NodeDrained  = lifecycle.NodeDrained
	NodeMaint    = lifecycle.NodeMaint
	NodeReserved = lifecycle.NodeReserved
)

// Resources are schedulable amounts.
type Resources struct {
	CPUMilli int64   `json:"cpu_milli"`
	Memory   int64   `json:"memory"` // bytes
	GPU      float64 `json:"gpu,omitempty"`
}

// NodeRegister is what a nodelet sends when it starts.
type NodeRegister struct {
	Name     string    `json:"name"`
	Addr     string    `json:"addr"` // IP other nodes reach its containers at
	Capacity Resources `json:"capacity"`
	Runtime  string    `json:"runtime"`          // runc | process
	Labels   []string  `json:"labels,omitempty"` // partitions.hcl selects nodes by them
	// OCIRuntime is the OCI runtime binary the runc driver runs and its
	// version, e.g. "crun 1.8.1" or "runc 1.1.5"; empty for the others.
	OCIRuntime string `json:"oci_runtime,omitempty"`
	// Instance tells one nodelet from another: an id the nodelet keeps
	// in its state directory, the same across its restarts. While a node
	// is live, schedd refuses a registration of its name from another
	// instance; once it has been silent for its lease (NodeLease.Lease,
	// after which its fence has stopped its containers) the newcomer
	// takes over. "" (an older nodelet) cannot be told apart and is
	// refused only by a live node that has an instance.
	Instance string `json:"instance,omitempty"`
}

// NodeHeartbeat is the optional body of POST /v1/nodes/{name}/heartbeat:
// a heartbeat from an instance other than the registered one is refused
// (409) and does not keep the node alive.
type NodeHeartbeat struct {
	Instance string `json:"instance,omitempty"`
	// Health is the node's health-check verdict (nodelet.hcl
	// health_check and the nodelet's own checks); nil from a nodelet
	// that runs none (an older one), which changes nothing.
	Health *NodeHealth `json:"health,omitempty"`
}

// NodeHealth is a node's health-check verdict: OK, or failing with
// Reason, the failing check's first line ("ERROR: nhc: Health check
// failed: ..."). A failing verdict drains the node until a passing one.
type NodeHealth struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// Node is a node as the API shows it: the view schedd builds from its row
// (sched/state.Node), plus what it derives for the answer (Allocated,
// Partitions, GPUs, a DRAINING or DRAINED state, a registration's
// Credential), which no row holds.
type Node struct {
	Name    string    `json:"name"`
	Addr    string    `json:"addr"`
	State   NodeState `json:"state"`
	Runtime string    `json:"runtime"`
	// OCIRuntime is NodeRegister's: the runc driver's binary and version.
	OCIRuntime    string    `json:"oci_runtime,omitempty"`
	Labels        []string  `json:"labels,omitempty"`
	Capacity      Resources `json:"capacity"`
	Allocated     Resources `json:"allocated"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	Registered    time.Time `json:"registered"`
	// Drain is set by badmin drain (until badmin resume): the scheduler
	// places nothing new on the node. It survives re-registration.
	Drain     bool      `json:"drain,omitempty"`
	DrainedBy string    `json:"drained_by,omitempty"`
	DrainedAt time.Time `json:"drained_at,omitzero"`
	// Reason is why the node is drained (badmin drain -r, else its
	// failing health check) or down ("Not responding"); empty otherwise.
	Reason string `json:"reason,omitempty"`
	// Health is the reason the node's health check fails, "" while it
	// passes. A failing check drains the node (Drain, with DrainedBy
	// "healthcheck" unless an admin drained it too) until it passes.
	Health string `json:"health,omitempty"`
	// HealthAt is when the node's health check began to fail; zero
	// while it passes.
	HealthAt time.Time `json:"health_at,omitzero"`
	// Partitions the node belongs to now (derived when answering).
	Partitions []string `json:"partitions,omitempty"`
	// Reservation is the reservation whose window is open on the node,
	// else the next one that will hold it (derived when answering).
	Reservation string `json:"reservation,omitempty"`
	// GPUs are the node's whole GPU devices and the shares the live
	// containers hold on each (derived when answering; nil without
	// GPUs): a request ≤ 1 must fit one device's free share.
	GPUs []NodeGPU `json:"gpus,omitempty"`
	// Instance is the registered nodelet's (NodeRegister's); kept in
	// the state, left out of node lists.
	Instance string `json:"instance,omitempty"`
	// Credential is set only in the answer to a registration made with
	// the cluster's join token: the node's own bearer token, bound to its
	// name, for its heartbeats, assignments and status reports.
	Credential string `json:"credential,omitempty"`
}

// NodeGPU is one GPU device of a node as bhosts -l shows it.
type NodeGPU struct {
	Device    int      `json:"device"`         // node-local index, the CUDA_VISIBLE_DEVICES ordinal
	Allocated float64  `json:"allocated"`      // the shares live containers hold, 0 to 1
	Jobs      []uint64 `json:"jobs,omitempty"` // the jobs holding a share, in id order
}

// NodeLease is schedd's answer to a heartbeat, and part of its answer to
// a registration: how often the nodelet must heartbeat, and how long it
// may keep its containers running without hearing from schedd again
// (its lease, counted from when it sent the request that got this
// answer). schedd derives both from its node timeout, so that a node it
// declares DOWN has stopped its containers before any of its jobs is
// requeued (nodelet(8), FENCING). Durations are in nanoseconds; zero
// fields: a schedd that announces none.
type NodeLease struct {
	Lease       time.Duration `json:"lease,omitempty"`
	Heartbeat   time.Duration `json:"heartbeat,omitempty"`
	NodeTimeout time.Duration `json:"node_timeout,omitempty"`
}

// NodeRegistered answers a registration: the node as schedd keeps it
// (a Node, so older nodelets read it as before) and its first lease.
type NodeRegistered struct {
	Node
	NodeLease
}

// NodeDrain drains nodes (badmin drain) or, with Resume, returns them
// to service (badmin resume).
type NodeDrain struct {
	Nodes  []string `json:"nodes"`
	Reason string   `json:"reason,omitempty"` // required to drain
	Resume bool     `json:"resume,omitempty"`
}

// NodeList lists nodes.
type NodeList struct {
	Nodes []Node `json:"nodes"`
	Index uint64 `json:"index"`
}

// Assignment is one job's containers on one node, with the whole session
// so the nodelet can write /etc/hosts and the environment.
type Assignment struct {
	Job AssignedJob `json:"job"` // the job as a nodelet needs it, all containers (other nodes' too)
	// Hosts are the container hostnames placed on this node.
	Hosts []string `json:"hosts"`
	// MaxOutput is the job's partition's max_output: the most bytes
	// each output or error file of the job may hold; the nodelet ends
	// the job when one passes it. 0: no limit (an older schedd).
	MaxOutput int64 `json:"max_output,omitempty"`
	// NoEgress: the job's partition turned egress off (network { egress
	// = false }): its containers get no default network, their session
	// network only.
	NoEgress bool `json:"no_egress,omitempty"`
	// Peers are the routed default addresses (Container.Reach) of the
	// containers of the job's user's other jobs that run on other
	// nodes: the node lets them open connections to this job's
	// containers, and no other user's.
	Peers []string `json:"peers,omitempty"`
	// StopGrace, when set, is how long the job's containers have between
	// SIGTERM and SIGKILL when they are stopped: the partition's
	// grace_time for a preempted job. 0: the nodelet's own stop grace.
	StopGrace time.Duration `json:"stop_grace,omitempty"`
}

// AssignedJob is a job as a nodelet needs it to run its containers: who
// runs it, what they run, the session (its network and every container,
// other nodes' too) and what schedd wants done (KillWanted, Signals). It
// is Job's subset, under Job's JSON names, so a nodelet reads an older
// schedd's whole Job as before; a field the nodelet comes to need is
// added here and filled where schedd builds assignments
// (sched.Assignments).
type AssignedJob struct {
	ID          uint64          `json:"id"`
	SessionID   string          `json:"session_id"`
	Network     *Network        `json:"network,omitempty"`
	Name        string          `json:"name"`
	User        string          `json:"user"`
	UID         int             `json:"uid"`
	GID         int             `json:"gid"`
	Cwd         string          `json:"cwd"`
	Partition   string          `json:"partition"`
	Account     string          `json:"account,omitempty"`
	Walltime    time.Duration   `json:"walltime,omitempty"`
	Spec        JobSpec         `json:"spec"`
	Interactive bool            `json:"interactive,omitempty"`
	KillWanted  bool            `json:"kill_wanted,omitempty"`
	Requeues    int             `json:"requeues,omitempty"`
	Containers  []Container     `json:"containers"`
	Signals     []SignalRequest `json:"signals,omitempty"`
	// Suspended is set while the job is suspended: every container of
	// it is to be frozen (gang suspend) until it is unset again.
	Suspended  *Suspension `json:"suspended,omitempty"`
	ArrayID    uint64      `json:"array_id,omitempty"`
	ArrayIndex int         `json:"array_index,omitempty"`
	ArraySpan  *ArraySpan  `json:"array_span,omitempty"`
}

// OutputVars are what the escapes of j's output and error patterns
// stand for in its container host (as Job.OutputVars).
func (j *AssignedJob) OutputVars(host string) outpattern.Vars {
	return outpattern.Vars{JobID: j.ID, ArrayID: j.ArrayID, ArrayIndex: j.ArrayIndex, Host: host, User: j.User, Cwd: j.Cwd}
}

// Container returns j's container named host; false if it has none.
func (j *AssignedJob) Container(host string) (Container, bool) {
	for _, c := range j.Containers {
		if c.Host == host {
			return c, true
		}
	}
	return Container{}, false
}

// Assignments is what a nodelet should be running now. A job whose
// KillWanted is set must have its containers stopped. A running container
// that is in no assignment must be stopped, unless NoJobsYet is set.
type Assignments struct {
	Assignments []Assignment `json:"assignments"`
	Index       uint64       `json:"index"`
	// NoJobsYet: schedd's state holds no job (a new or emptied data
	// dir, before a backup is restored into it; the id counter, which
	// the nodes' reports of jobs it lost move, plays no part). It cannot
	// tell which of the node's containers should stop, so the nodelet
	// stops none for being unassigned until the state holds jobs.
	NoJobsYet bool `json:"no_jobs_yet,omitempty"`
	// AdoptUntil is set while schedd adopts what the nodes run after a
	// restore into a state that held no job: the end of that window, on
	// schedd's clock (it also names the window). Meanwhile a nodelet
	// tells schedd, once, the ends it keeps of containers that ended
	// here, and announces with its copy of the job each container
	// schedd does not assign.
	AdoptUntil time.Time `json:"adopt_until,omitzero"`
}

// ContainerReport is a nodelet's report on its containers.
type ContainerReport struct {
	Updates []ContainerUpdate `json:"updates"`
	// Sent is the node's clock when it sent the report: schedd moves the
	// updates' times onto its own clock by the difference (OnClock).
	Sent time.Time `json:"sent,omitzero"`
}

// OnClock moves the times of r's updates from the sender's clock onto
// the receiver's, whose clock read now when r arrived: each moves by
// now − Sent, so a node whose clock is off still has its containers
// end at the right time. The shifted times are then clamped to now (a
// report tells nothing of the future), and Sent is cleared. Without
// Sent (an older node) the times are kept as sent, clamped alike.
func (r *ContainerReport) OnClock(now time.Time) {
	var skew time.Duration
	if !r.Sent.IsZero() {
		skew = now.Sub(r.Sent)
	}
	for i := range r.Updates {
		u := &r.Updates[i]
		if u.At.IsZero() {
			continue
		}
		u.At = u.At.Add(skew)
		if u.At.After(now) {
			u.At = now
		}
	}
	r.Sent = time.Time{}
}

// ContainerUpdate reports one container's state.
type ContainerUpdate struct {
	JobID uint64 `json:"job_id"`
	Host  string `json:"host"`
	// Requeues is the run of the job the update is about (its Requeues
	// when the nodelet started it): schedd drops reports about an earlier
	// run of a requeued job.
	Requeues int            `json:"requeues,omitempty"`
	State    ContainerState `json:"state"`
	ExitCode int            `json:"exit_code"`
	Message  string         `json:"message,omitempty"`
	// CPUTime and MemPeak are the container's usage, on its final update.
	CPUTime time.Duration `json:"cpu_time,omitempty"`
	MemPeak int64         `json:"mem_peak,omitempty"`
	// At is, on a final update, when the container's process ended as
	// the node measured it (on a running update, when it started): it
	// may come long after (the node could not report, its nodelet was
	// down), and schedd ends (starts) the run then, not when the report
	// arrives. On the node's clock until schedd takes the report
	// (ContainerReport.OnClock); zero when the node cannot tell.
	At time.Time `json:"at,omitzero"`
	// Starting is, on a running update, how long the node took to start
	// the container once it took it on (its preparing). A node drops a
	// preparing update that its container's next update overtakes, so
	// schedd times the preparing stage with this.
	Starting time.Duration `json:"starting,omitempty"`
	// Reach is, on a running update, the container's address on the
	// node's routed default network (Container.Reach); "" leaves it.
	Reach string `json:"reach,omitempty"`
	// Session is the session id of the job the node runs the container
	// of (Job.SessionID), on every update: after a restore, schedd
	// adopts a container its state shows unplaced only when the job it
	// holds under that id is the same one (its session). "": an older
	// nodelet, never adopted.
	Session string `json:"session,omitempty"`
	// Started is, on a final update, when the container started on the
	// node (zero: unknown): a restore that learns of a run only from its
	// end still knows when it began.
	Started time.Time `json:"started,omitzero"`
	// Job is, during the adoption window after a restore
	// (Assignments.AdoptUntil), the node's copy of the container's job
	// on a running update that announces a container schedd does not
	// assign, and on a kept final update the node tells again: schedd
	// adopts a job submitted after the backup from it, running, or
	// records it ended.
	Job *AssignedJob `json:"job,omitempty"`
}

// AttachRequest asks a nodelet to connect a client to the terminal of
// one of its containers: it answers with POST
// /v1/nodes/{name}/attach/{ID}, upgraded, and splices that stream to the
// container's attach socket. With Port set it is an app's stream
// instead (schedd's /apps proxy): the nodelet dials that port, which
// must be one of the job's services, inside the container's network
// namespace, writes AppReady (or "error: why\n", or AppBusy and why
// past its caps on open streams) and splices the two.
type AttachRequest struct {
	ID    string `json:"id"`
	JobID uint64 `json:"job_id"`
	Host  string `json:"host"`
	Run   int    `json:"run"` // the job's Requeues
	Port  int    `json:"port,omitempty"`
}

// AppReady is the line a nodelet writes on an app's stream once it
// connected the service's port; bytes after it are the app's.
const AppReady = "ok\n"

// AppBusy starts the line a nodelet writes on an app's stream it refused
// because a cap on its open streams is reached ("busy: why\n"): schedd
// answers the caller 429, as for its own caps.
const AppBusy = "busy: "

// AttachRequests are the attach requests waiting for a node.
type AttachRequests struct {
	Requests []AttachRequest `json:"requests"`
}

// PartitionInfo is a partition as badmin partitions shows it: its
// settings from partitions.hcl and what it holds now.
type PartitionInfo struct {
	Name            string        `json:"name"`
	Default         bool          `json:"default,omitempty"`
	Nodes           []string      `json:"nodes"` // nodes that belong to it now, by name
	NodePatterns    []string      `json:"node_patterns,omitempty"`
	Labels          []string      `json:"labels,omitempty"`
	MaxWalltime     time.Duration `json:"max_walltime,omitempty"`
	DefaultWalltime time.Duration `json:"default_walltime,omitempty"`
	MaxClusterSize  int           `json:"max_cluster_size,omitempty"`
	PriorityTier    int           `json:"priority_tier,omitempty"`
	AllowedAccounts []string      `json:"allowed_accounts,omitempty"`
	AllowedModes    []string      `json:"allowed_modes,omitempty"`
	GPUQuantum      float64       `json:"gpu_quantum"`
	MaxOutput       int64         `json:"max_output,omitempty"` // bytes per output or error file
	UserLimits      UserLimits    `json:"user_limits"`
	Capacity        Resources     `json:"capacity"` // of its up nodes
	Pending         int           `json:"pending"`
	Running         int           `json:"running"` // started, not ended
}

// UserLimits cap what one user holds in a partition; zero is unlimited.
type UserLimits struct {
	MaxJobs       int     `json:"max_jobs,omitempty"`
	MaxSubmitJobs int     `json:"max_submit_jobs,omitempty"`
	MaxCPU        float64 `json:"max_cpu,omitempty"`
	MaxMemory     int64   `json:"max_memory,omitempty"`
	MaxGPU        float64 `json:"max_gpu,omitempty"`
}

// PartitionList is the answer of GET /v1/partitions.
type PartitionList struct {
	Source     string          `json:"source,omitempty"` // the partitions file; "" built in
	Policy     string          `json:"policy"`
	Partitions []PartitionInfo `json:"partitions"`
	// MaxJobInput and MaxQueuedPerUser are schedd's submit limits
	// (schedd.hcl's max_job_input, bytes; max_queued_per_user, 0
	// unlimited), so that bsub --dry-run judges a job as submit would.
	// MaxJobInput 0: a schedd that does not say.
	MaxJobInput      int `json:"max_job_input,omitempty"`
	MaxQueuedPerUser int `json:"max_queued_per_user,omitempty"`
	// Licenses are the site-wide licenses (partitions.hcl's license
	// blocks) and their use now, in file order (badmin licenses,
	// scontrol show licenses).
	Licenses []License `json:"licenses,omitempty"`
	Index    uint64    `json:"index"`
}

// License is one site-wide license and its use: Used is what the jobs
// that run hold together, which a lowered count can leave above Total
// until enough of them end; Free is what a job may take now (never
// below 0). Waiting counts the queued jobs that ask for it.
type License struct {
	Name    string `json:"name"`
	Total   int    `json:"total"`
	Used    int    `json:"used"`
	Free    int    `json:"free"`
	Waiting int    `json:"waiting"`
}

// FairShareRow is one line of badmin fairshare, as Slurm's sshare prints
// it: an account (User empty) or a user's association under an account.
type FairShareRow struct {
	Account string `json:"account"`
	User    string `json:"user,omitempty"`
	Depth   int    `json:"depth"` // 0 for top-level accounts
	// RawShares as configured; NormShares is the fraction of the whole
	// cluster they amount to.
	RawShares  float64 `json:"raw_shares"`
	NormShares float64 `json:"norm_shares"`
	// RawUsage is decayed, billed TRES-seconds; EffectvUsage the fraction
	// of the whole cluster's.
	RawUsage     float64 `json:"raw_usage"`
	EffectvUsage float64 `json:"effectv_usage"`
	// FairShare is the factor F = 2^(-U/S) in [0, 1]; set on users.
	FairShare float64 `json:"fair_share"`
}

// FairShareList is the answer of GET /v1/fairshare.
type FairShareList struct {
	HalfLife time.Duration  `json:"usage_half_life"`
	Rows     []FairShareRow `json:"rows"`
	Index    uint64         `json:"index"`
}

// ReconfigResponse answers a reconfig that was applied.
type ReconfigResponse struct {
	Source     string   `json:"source"`
	Partitions []string `json:"partitions"`
	Warnings   []string `json:"warnings,omitempty"`
}

// Error is the body of every non-2xx response.
type Error struct {
	Error string `json:"error"`
	// Problems lists a refused submission's reasons one by one (Error
	// joins them with "; "), each with the setting's path and, when the
	// job came from a file, its place there.
	Problems []Problem `json:"problems,omitempty"`
}

// Problem is one reason schedd refuses a submission.
type Problem struct {
	Path     string `json:"path,omitempty"`     // the spec's JSON path, e.g. "cluster.size"
	Position string `json:"position,omitempty"` // "file:line:col" when the job came from a file
	Message  string `json:"message"`
}

// String is "file:line:col: message", or the message without a
// position.
func (p Problem) String() string {
	if p.Position != "" {
		return p.Position + ": " + p.Message
	}
	return p.Message
}

// SnapshotRestored answers a snapshot restore that was applied.
type SnapshotRestored struct {
	Jobs  int `json:"jobs"`
	Nodes int `json:"nodes"`
	// History is what became of the accounting records the file carried;
	// absent for a state-only file (the store was kept as it was).
	History *SnapshotHistory `json:"history,omitempty"`
}

// SnapshotHistory counts a restored snapshot file's accounting records:
// Records in the file, Added of them the store lacked (the others it
// held already), After of them runs that ended after the snapshot's
// state was taken (the state shows those jobs unended, or not at all).
type SnapshotHistory struct {
	Records int `json:"records"`
	Added   int `json:"added"`
	After   int `json:"after"`
}

// Token is a bearer token's record (the secret itself is never stored:
// Hash is its SHA-256, hex). Node is set for a node credential, which
// acts only for that node.
type Token struct {
	ID      string    `json:"id"`
	Hash    string    `json:"hash,omitempty"`
	UID     int       `json:"uid"`
	GID     int       `json:"gid"`
	User    string    `json:"user"`
	Admin   bool      `json:"admin,omitempty"`
	Node    string    `json:"node,omitempty"`
	Created time.Time `json:"created"`
}

// TokenCreate asks for a user token (POST /v1/tokens). User "" is the
// caller; only admins name another user or ask for Admin.
type TokenCreate struct {
	User  string `json:"user,omitempty"`
	Admin bool   `json:"admin,omitempty"`
}

// TokenCreated answers TokenCreate: the secret is shown this once.
type TokenCreated struct {
	Token
	Secret string `json:"secret"`
}

// TokenList lists tokens (GET /v1/tokens), without their hashes.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// RaftJoin asks the leader to add a schedd peer (POST /v1/raft/join,
// administrators only; schedd --join sends it).
type RaftJoin struct {
	ID   string `json:"id"`
	Addr string `json:"addr"` // its raft address, host:port
}
