package state

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/troupe-hpc/troupe/internal/arrayindex"
	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// Job is a job's row: what the jobs table holds, what a submit command
// carries in the raft log and what a snapshot keeps. It holds only what
// every replica agrees on, in the form the scheduler and the nodes use
// it: admission resolves the job file (its partition, account and
// walltime in force, each container's role, image, command and
// resources in millicores and bytes) and builds the row (sched's
// admit.go); the row holds no job file and no API type, so a change to
// either is not a change to the log. What the leader works out for an
// answer (its last pass's start estimate, priority and queue position)
// lives beside the state and is added to the view (api.Job) when schedd
// answers, never here.
//
// To add a field: here if it is replicated (an Apply branch sets it),
// then in api.Job and in the conversion (sched/view.go) if clients see
// it, classifying it in api/redact.go. A field whose absence an older
// schedd would misread needs a schema version (SchemaVersion).
type Job struct {
	ID        uint64   `json:"id"`
	SessionID string   `json:"session_id"`           // equals main1's kernel id
	RequestID string   `json:"request_id,omitempty"` // the submission's idempotency key
	Network   *Network `json:"network,omitempty"`
	Name      string   `json:"name"`
	User      string   `json:"user"`
	UID       int      `json:"uid"`
	GID       int      `json:"gid"`
	Cwd       string   `json:"cwd"`
	Partition string   `json:"partition"`
	Account   string   `json:"account,omitempty"` // fair-share account, resolved at submit
	// Reservation names the reservation the job runs in ("" none):
	// checked at admission, held to by the scheduling core.
	Reservation string `json:"reservation,omitempty"`
	// Walltime is the limit in force: the job's, else its partition's
	// default; 0 none. It is the job's only walltime.
	Walltime time.Duration `json:"walltime,omitempty"`
	// Spec is what the job asks of its session beyond its containers.
	Spec Spec `json:"spec"`
	// Licenses are the site-wide licenses the job holds from its
	// placement to its end, by name, as admission took them (see
	// HoldsLicenses).
	Licenses map[string]int `json:"licenses,omitempty"`
	// InputBytes is what the job's text (commands, environment, mounts,
	// paths and names) costs schedd to keep, measured at admission: the
	// per-user and total queued-input counts add it up.
	InputBytes int `json:"input_bytes,omitempty"`
	// Interactive: main1's command runs on a terminal (bsub -I, battach).
	Interactive bool               `json:"interactive,omitempty"`
	State       lifecycle.JobState `json:"state"`
	Reason      string             `json:"reason,omitempty"`      // pending reason or end cause
	ExitCode    int                `json:"exit_code"`             // main1's, once ended
	KillWanted  bool               `json:"kill_wanted,omitempty"` // bkill or session end: nodelets stop containers
	Cancelled   bool               `json:"cancelled,omitempty"`   // bkill asked for it; the job ends CANCELLED
	// KillDone: bkill -d asked for it; the job ends COMPLETED, not
	// CANCELLED (LSF's "kill and record as DONE").
	KillDone bool `json:"kill_done,omitempty"`
	TimedOut bool `json:"timed_out,omitempty"` // ran past its walltime; the job ends TIMEOUT
	// Requeues counts the times a node failure put the job back in the
	// queue; LastRequeue says why the last time.
	Requeues    int    `json:"requeues,omitempty"`
	LastRequeue string `json:"last_requeue,omitempty"`
	// Runs are the runs a requeue ended, oldest first (Runs[i] is run
	// i): history keeps each. The row's own times, exit code, usage and
	// containers are its current run's.
	Runs        []Run       `json:"runs,omitempty"`
	Containers  []Container `json:"containers"`
	Submitted   time.Time   `json:"submitted"`
	Started     time.Time   `json:"started,omitzero"`
	Ended       time.Time   `json:"ended,omitzero"`
	ModifyIndex uint64      `json:"modify_index"`
	// DependsOn is what the job waits for (bsub -w); answers fill in
	// each condition's status.
	DependsOn *Dependency `json:"depends_on,omitempty"`
	// Signals are the signal requests (bkill -s) made while it ran, in
	// order: Seq is the position + 1. Nodelets deliver each once.
	Signals []SignalRequest `json:"signals,omitempty"`
	// Mailed are the mail events (MailBegin of a run, MailEnd) schedd
	// has taken on for the job's Spec.Mail: each is sent at most once.
	Mailed []string `json:"mailed,omitempty"`
	// Suspended is set while the running job is suspended (its
	// containers frozen; suspend.go); SuspendedFor sums the current
	// run's ended suspensions, which its walltime does not count.
	// Warned is when its warning signal was sent this run.
	Suspended    *Suspension   `json:"suspended,omitempty"`
	SuspendedFor time.Duration `json:"suspended_for,omitempty"`
	Warned       time.Time     `json:"warned,omitzero"`
	// CPUTime and MemPeak sum its containers' usage as they ended.
	CPUTime time.Duration `json:"cpu_time,omitempty"`
	MemPeak int64         `json:"mem_peak,omitempty"`
	// Array is set on a job array's own row (see Array).
	Array *Array `json:"array,omitempty"`
	// ArrayID, ArrayIndex and ArraySpan are set on an element of a job
	// array.
	ArrayID    uint64     `json:"array_id,omitempty"`
	ArrayIndex int        `json:"array_index,omitempty"`
	ArraySpan  *ArraySpan `json:"array_span,omitempty"`
	// QOS is the job's quality of service, resolved at submit.
	QOS string `json:"qos,omitempty"`
	// Preempt is the job's last preemption (Run: the run it stopped).
	Preempt *PreemptRecord `json:"preempt,omitempty"`
	// Preempted are the jobs this one preempted, in order.
	Preempted []uint64 `json:"preempted,omitempty"`
	// ExcludeNodes are nodes the job must not be placed on again: a
	// node whose health check failed while the job ran there, which
	// requeued it.
	ExcludeNodes []string `json:"exclude_nodes,omitempty"`
}

// Roles every session has: main1 runs the job's command; subs wait.
const (
	RoleMain = "main"
	RoleSub  = "sub"
)

// Spec is what a job asks of its session beyond its containers, as
// admission took it from the job file: what the nodes need to set the
// session up (mode, ssh, workdir, environment, mounts, output paths,
// services), the scheduler's and the state's (priority, requeue, array)
// and schedd's (mail). Its JSON names are the job file's, so a row
// written before rows were resolved reads as one.
type Spec struct {
	Priority int               `json:"priority,omitempty"` // nice; <= 0 lowers
	Requeue  bool              `json:"requeue,omitempty"`  // a node failure requeues the job
	SSH      bool              `json:"ssh,omitempty"`      // a one-container session gets troupe's ssh
	Cluster  Cluster           `json:"cluster"`
	Image    string            `json:"image"`             // the job's image; each container names its own
	Command  []string          `json:"command,omitempty"` // main1's
	Workdir  string            `json:"workdir,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Mounts   []Mount           `json:"mounts,omitempty"`
	Output   string            `json:"output,omitempty"` // %j job id, %h host, %u user, %I array index
	Error    string            `json:"error,omitempty"`  // empty: stderr goes to the output file
	Services []Service         `json:"services,omitempty"`
	Array    *ArrayRequest     `json:"array,omitempty"` // nil: one job
	Mail     *Mail             `json:"mail,omitempty"`  // nil: no mail
	// Signal is the warning signal the job asks for before it is
	// stopped (nil: none; suspend.go).
	Signal *Warning `json:"signal,omitempty"`
}

// Cluster is the shape of the session.
type Cluster struct {
	Size int    `json:"size"` // total containers, main1 included
	Mode string `json:"mode"` // single-node or multi-node
}

// Mount is a data folder mounted at the same target in every container.
type Mount struct {
	Name     string `json:"name"`
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readonly,omitempty"`
}

// Service is a port main1 serves that schedd proxies to the job's owner.
type Service struct {
	Name       string `json:"name"`
	Port       int    `json:"port"`
	Protocol   string `json:"protocol,omitempty"`
	KeepPrefix bool   `json:"keep_prefix,omitempty"`
}

// Service returns the job's service name, nil when it has none.
func (s *Spec) Service(name string) *Service {
	for i := range s.Services {
		if s.Services[i].Name == name {
			return &s.Services[i]
		}
	}
	return nil
}

// ArrayRequest is what a job array asks: its index range as the job file
// wrote it and its throttle.
type ArrayRequest struct {
	Range      string `json:"range"`
	MaxRunning int    `json:"max_running,omitempty"`
}

// Mail is when to mail whom about the job.
type Mail struct {
	To    string `json:"to,omitempty"` // empty: the submitting user
	Begin bool   `json:"begin,omitempty"`
	End   bool   `json:"end,omitempty"`
	Fail  bool   `json:"fail,omitempty"`
}

// Wanted reports whether m asks for any mail.
func (m *Mail) Wanted() bool { return m != nil && (m.Begin || m.End || m.Fail) }

// Network is a session's private network (see Network).
type Network struct {
	VNI    uint32 `json:"vni"`
	Subnet string `json:"subnet"`
}

// Container is one container of a job's row: where it is in the session,
// what it runs and what it holds, resolved at admission, and how it
// stands (its node, addresses, state, usage).
type Container struct {
	Host    string   `json:"host"` // main1, sub1, ...
	Role    string   `json:"role"` // main, sub, ...
	Idx     int      `json:"idx"`  // 1-based within its role
	Rank    int      `json:"rank"` // 0-based in the session
	Image   string   `json:"image"`
	Command []string `json:"command,omitempty"` // empty: wait (subs)
	// CPUMilli, Memory (bytes) and GPU (devices' worth) are what the
	// container holds where it is placed: admission's conversion of its
	// job file's resources, the one the scheduler counts and the node
	// enforces (its CFS quota is CPUMilli × 100 µs a 100 ms period).
	CPUMilli int64                    `json:"cpu_milli"`
	Memory   int64                    `json:"memory"`
	GPU      float64                  `json:"gpu,omitempty"`
	KernelID string                   `json:"kernel_id"`
	Node     string                   `json:"node,omitempty"`
	NodeAddr string                   `json:"node_addr,omitempty"`
	Addr     string                   `json:"addr,omitempty"`
	Reach    string                   `json:"reach,omitempty"`
	State    lifecycle.ContainerState `json:"state"`
	ExitCode int                      `json:"exit_code"`
	Message  string                   `json:"message,omitempty"`
	// GPUs are the device shares the container holds on its node.
	GPUs    []GPUShare    `json:"gpus,omitempty"`
	CPUTime time.Duration `json:"cpu_time,omitempty"`
	MemPeak int64         `json:"mem_peak,omitempty"`
	// Ended is when it ended, as its node measured it (schedd's clock).
	Ended time.Time `json:"ended,omitzero"`
}

// Res is what c holds while it is placed.
func (c *Container) Res() Resources {
	return Resources{CPUMilli: c.CPUMilli, Memory: c.Memory, GPU: c.GPU}
}

// GPUShare is a slice of one GPU device of a node.
type GPUShare struct {
	Device int     `json:"device"`
	Share  float64 `json:"share"`
}

// Resources are schedulable amounts.
type Resources struct {
	CPUMilli int64   `json:"cpu_milli"`
	Memory   int64   `json:"memory"`
	GPU      float64 `json:"gpu,omitempty"`
}

// Run is an earlier run of a requeued job, as the requeue ended it.
type Run struct {
	Started    time.Time      `json:"started,omitzero"`
	Ended      time.Time      `json:"ended"`
	Reason     string         `json:"reason"`
	ExitCode   int            `json:"exit_code"`
	CPUTime    time.Duration  `json:"cpu_time,omitempty"`
	MemPeak    int64          `json:"mem_peak,omitempty"`
	Containers []RunContainer `json:"containers"`
}

// RunContainer is one container of a run as it ended.
type RunContainer struct {
	Host     string                   `json:"host"`
	Node     string                   `json:"node,omitempty"`
	State    lifecycle.ContainerState `json:"state"`
	ExitCode int                      `json:"exit_code"`
	Message  string                   `json:"message,omitempty"`
	CPUTime  time.Duration            `json:"cpu_time,omitempty"`
	MemPeak  int64                    `json:"mem_peak,omitempty"`
	Ended    time.Time                `json:"ended,omitzero"`
}

// Dependency is what a job waits for: Conditions all hold, or with Any
// one of them does.
type Dependency struct {
	Any        bool        `json:"any,omitempty"`
	Conditions []Condition `json:"conditions"`
}

// Condition is one term of a dependency: Kind (done, exit, ended,
// started) of job JobID, or of its element Index.
type Condition struct {
	Kind  string `json:"kind"`
	JobID uint64 `json:"job_id"`
	Index *int   `json:"index,omitempty"`
}

// SignalRequest is one signal request a running job holds (bkill -s).
type SignalRequest struct {
	Seq    uint64    `json:"seq"`
	Signal int       `json:"signal"`
	Host   string    `json:"host,omitempty"`
	Time   time.Time `json:"time"`
}

// Array is a job array's own row's account of its elements: its indices,
// its throttle and how many elements stand in each state (an element
// without a row yet counts PENDING, or HELD while the array is held).
type Array struct {
	Indices    arrayindex.Indices         `json:"indices"`
	Count      int                        `json:"count"`
	MaxRunning int                        `json:"max_running,omitempty"`
	States     map[lifecycle.JobState]int `json:"states"`
	// Next is how many elements, in index order, have had their turn to
	// get a row; Early lists the indices beyond that got one before
	// their turn (held or killed by name).
	Next  int   `json:"next"`
	Early []int `json:"early,omitempty"`
	// Held: the whole array was held: no element gets a row or starts
	// until it is released.
	Held bool `json:"held,omitempty"`
}

// Started counts the array's elements placed and not ended.
func (a *Array) Started() int {
	return a.States[lifecycle.JobScheduled] + a.States[lifecycle.JobPreparing] + a.States[lifecycle.JobRunning]
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

// ArraySpan is what an element knows of its array.
type ArraySpan struct {
	Min   int `json:"min"`
	Max   int `json:"max"`
	Count int `json:"count"`
	Step  int `json:"step"`
}

// Ref is how users name j: "12", or "12[5]" for an element.
func (j *Job) Ref() string {
	if j.ArrayID != 0 {
		return fmt.Sprintf("%d[%d]", j.ArrayID, j.ArrayIndex)
	}
	return strconv.FormatUint(j.ID, 10)
}

// Node is a node's row: what the nodes table holds, a register command
// carries and a snapshot keeps. What schedd derives when it answers (the
// allocation, the partitions, the GPU shares, a DRAINING or DRAINED
// state, a registration's credential) is the view's (Node), never
// stored.
type Node struct {
	Name    string              `json:"name"`
	Addr    string              `json:"addr"`
	State   lifecycle.NodeState `json:"state"`
	Runtime string              `json:"runtime"`
	// OCIRuntime is NodeRegister's: the runc driver's binary and version.
	OCIRuntime    string    `json:"oci_runtime,omitempty"`
	Labels        []string  `json:"labels,omitempty"`
	Capacity      Resources `json:"capacity"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	Registered    time.Time `json:"registered"`
	// Drain is set by badmin drain (until badmin resume): the scheduler
	// places nothing new on the node. It survives re-registration.
	Drain     bool      `json:"drain,omitempty"`
	DrainedBy string    `json:"drained_by,omitempty"`
	DrainedAt time.Time `json:"drained_at,omitzero"`
	// Reason is why the node is drained (badmin drain -r); empty
	// otherwise (a DOWN node's "Not responding" is the view's).
	Reason string `json:"reason,omitempty"`
	// Health is the failing health check's reason while the node's own
	// checks fail (the Health act), "" while they pass: a drain of its own,
	// apart from the admin's Drain, lifted by a passing check alone.
	// HealthAt is when the checks began to fail.
	Health   string    `json:"health,omitempty"`
	HealthAt time.Time `json:"health_at,omitzero"`
	// Instance is the registered nodelet's (NodeRegister's).
	Instance string `json:"instance,omitempty"`
}

// LegacyNode is a node row as schemas 1 to 4 wrote it: the whole view,
// with its derived allocation (always zero in a row). Readers that refuse
// unknown fields (a snapshot file, sched.ReadSnapshot) read such rows
// through it and drop Allocated; others ignore the field.
type LegacyNode struct {
	Node
	Allocated json.RawMessage `json:"allocated,omitempty"`
}

// ContainerUpdate is a node's report on one container (see
// ContainerUpdate, which the nodelet sends and schedd takes into a
// report command).
type ContainerUpdate struct {
	JobID    uint64                   `json:"job_id"`
	Host     string                   `json:"host"`
	Requeues int                      `json:"requeues,omitempty"` // the job's run the update is about
	State    lifecycle.ContainerState `json:"state"`
	ExitCode int                      `json:"exit_code"`
	Message  string                   `json:"message,omitempty"`
	CPUTime  time.Duration            `json:"cpu_time,omitempty"`
	MemPeak  int64                    `json:"mem_peak,omitempty"`
	// At is when the container ended (on a running update, started) as
	// its node measured it, on schedd's clock; zero when it cannot tell.
	At time.Time `json:"at,omitzero"`
	// Starting is how long the node took to start the container.
	Starting time.Duration `json:"starting,omitempty"`
	// Reach is the container's routed address; "" leaves it.
	Reach string `json:"reach,omitempty"`
	// Session is the session id of the job the node runs it for.
	Session string `json:"session,omitempty"`
	// Started is, on a final update, when the container started on the
	// node (zero: unknown).
	Started time.Time `json:"started,omitzero"`
	// Job is, on a running update that announces a container schedd
	// does not assign during the adoption window after a restore, the
	// node's copy of its job as a row (what schedd assigned it): schedd
	// adopts a job submitted after the backup from it.
	Job *Job `json:"job,omitempty"`
}

// Token is a bearer token's record (its secret's SHA-256, hex, never the
// secret). Node is set for a node credential.
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

// DeviceUse is what live containers hold of one GPU device of a node.
type DeviceUse struct {
	Device    int      `json:"device"`
	Allocated float64  `json:"allocated"`
	Jobs      []uint64 `json:"jobs,omitempty"`
}

// EndedRun is a job's ended run as the accounting store holds it (what
// a restore ends a job with).
type EndedRun struct {
	ID         uint64
	State      lifecycle.JobState
	Reason     string
	ExitCode   int
	Requeues   int
	Started    time.Time
	Ended      time.Time
	CPUTime    time.Duration
	MemPeak    int64
	Containers []RunContainer
}
