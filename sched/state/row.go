package state

import (
	"encoding/json"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/jobspec"
)

// Job is a job's row: what the jobs table holds, what a submit command
// carries in the raft log and what a snapshot keeps. It holds only what
// every replica agrees on; what the leader works out for an answer (its
// last pass's start estimate, priority and queue position) lives beside
// the state and is added to the view (Job) when schedd answers, never
// here. The JSON names are the view's, so a row reads as the job did
// before rows and views were split.
//
// To add a field: here if it is replicated (an Apply branch sets it),
// then in Job and in the conversion (sched/view.go) if clients see it,
// classifying it in api/redact.go.
type Job struct {
	ID        uint64        `json:"id"`
	SessionID string        `json:"session_id"`           // equals main1's kernel id
	RequestID string        `json:"request_id,omitempty"` // the submission's idempotency key
	Network   *api.Network  `json:"network,omitempty"`
	Name      string        `json:"name"`
	User      string        `json:"user"`
	UID       int           `json:"uid"`
	GID       int           `json:"gid"`
	Cwd       string        `json:"cwd"`
	Partition string        `json:"partition"`
	Account   string        `json:"account,omitempty"`  // fair-share account, resolved at submit
	Walltime  time.Duration `json:"walltime,omitempty"` // the limit in force: the job's, else the partition default; 0 none
	Spec      jobspec.Job   `json:"spec"`
	// Interactive: main1's command runs on a terminal (bsub -I, battach).
	Interactive bool         `json:"interactive,omitempty"`
	State       api.JobState `json:"state"`
	Reason      string       `json:"reason,omitempty"`      // pending reason or end cause
	ExitCode    int          `json:"exit_code"`             // main1's, once ended
	KillWanted  bool         `json:"kill_wanted,omitempty"` // bkill or session end: nodelets stop containers
	Cancelled   bool         `json:"cancelled,omitempty"`   // bkill asked for it; the job ends CANCELLED
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
	Runs        []api.JobRun `json:"runs,omitempty"`
	Containers  []Container  `json:"containers"`
	Submitted   time.Time    `json:"submitted"`
	Started     time.Time    `json:"started,omitzero"`
	Ended       time.Time    `json:"ended,omitzero"`
	ModifyIndex uint64       `json:"modify_index"`
	// DependsOn is what the job waits for (bsub -w); answers fill in
	// each condition's status.
	DependsOn *api.Dependency `json:"depends_on,omitempty"`
	// Signals are the signal requests (bkill -s) made while it ran, in
	// order: Seq is the position + 1. Nodelets deliver each once.
	Signals []api.SignalRequest `json:"signals,omitempty"`
	// Mailed are the mail events (MailBegin of a run, MailEnd) schedd
	// has taken on for the job's Spec.Mail: each is sent at most once.
	Mailed []string `json:"mailed,omitempty"`
	// CPUTime and MemPeak sum its containers' usage as they ended.
	CPUTime time.Duration `json:"cpu_time,omitempty"`
	MemPeak int64         `json:"mem_peak,omitempty"`
	// Array is set on a job array's own row (see api.Array).
	Array *api.Array `json:"array,omitempty"`
	// ArrayID, ArrayIndex and ArraySpan are set on an element of a job
	// array (see Job).
	ArrayID    uint64         `json:"array_id,omitempty"`
	ArrayIndex int            `json:"array_index,omitempty"`
	ArraySpan  *api.ArraySpan `json:"array_span,omitempty"`
	// ExcludeNodes are nodes the job must not be placed on again: a
	// node whose health check failed while the job ran there, which
	// requeued it.
	ExcludeNodes []string `json:"exclude_nodes,omitempty"`
}

// Container is one container of a job's row: the view's container and
// its request in schedulable units.
type Container struct {
	api.Container
	// CPUMilli is the container's CPU request in millicores, converted
	// once from its job file's cpu at admission (NewContainer); every
	// count of CPUs (placement, allocation, limits) reads it from here.
	// Rows written before schema 5 carry none: Apply and Restore derive
	// it (legacyMilli).
	CPUMilli int64 `json:"cpu_milli,omitempty"`
}

// NewContainer is c as a row's container, pending, with its request in
// schedulable units: the one place a job file's cpu becomes millicores.
func NewContainer(c jobspec.Container, kernelID string) Container {
	return Container{
		Container: api.Container{Container: c, KernelID: kernelID, State: api.ContainerPending},
		CPUMilli:  units.MilliCPU(c.Resources.CPU),
	}
}

// Res is what c holds while it is placed, in schedulable units.
func (c *Container) Res() api.Resources {
	return api.Resources{CPUMilli: c.CPUMilli, Memory: c.Resources.Memory, GPU: c.Resources.GPU}
}

// legacyMilli is j with the millicores of a row written before schema 5
// (whose containers carry none) filled from its job file's cpu, as
// admission fills them now; j itself when it has them (j is not
// modified: it may be shared).
func legacyMilli(j *Job) *Job {
	out := j
	for i := range j.Containers {
		c := &j.Containers[i]
		if m := units.MilliCPU(c.Resources.CPU); c.CPUMilli == 0 && m != 0 {
			if out == j {
				out = clone(j)
			}
			out.Containers[i].CPUMilli = m
		}
	}
	return out
}

// Ref is how users name j: "12", or "12[5]" for an element.
func (j *Job) Ref() string {
	if j.ArrayID != 0 {
		return api.JobRef{ID: j.ArrayID, Index: j.ArrayIndex, Element: true}.String()
	}
	return api.JobRef{ID: j.ID}.String()
}

// OutputVars are what the escapes of j's output and error patterns
// stand for in its container host (see Job.OutputVars).
func (j *Job) OutputVars(host string) jobspec.OutputVars {
	return jobspec.OutputVars{JobID: j.ID, ArrayID: j.ArrayID, ArrayIndex: j.ArrayIndex, Host: host, User: j.User, Cwd: j.Cwd}
}

// Node is a node's row: what the nodes table holds, a register command
// carries and a snapshot keeps. What schedd derives when it answers (the
// allocation, the partitions, the GPU shares, a DRAINING or DRAINED
// state, a registration's credential) is the view's (Node), never
// stored.
type Node struct {
	Name    string        `json:"name"`
	Addr    string        `json:"addr"`
	State   api.NodeState `json:"state"`
	Runtime string        `json:"runtime"`
	// OCIRuntime is NodeRegister's: the runc driver's binary and version.
	OCIRuntime    string        `json:"oci_runtime,omitempty"`
	Labels        []string      `json:"labels,omitempty"`
	Capacity      api.Resources `json:"capacity"`
	LastHeartbeat time.Time     `json:"last_heartbeat"`
	Registered    time.Time     `json:"registered"`
	// Drain is set by badmin drain (until badmin resume): the scheduler
	// places nothing new on the node. It survives re-registration.
	Drain     bool      `json:"drain,omitempty"`
	DrainedBy string    `json:"drained_by,omitempty"`
	DrainedAt time.Time `json:"drained_at,omitzero"`
	// Reason is why the node is drained (badmin drain -r); empty
	// otherwise (a DOWN node's "Not responding" is the view's).
	Reason string `json:"reason,omitempty"`
	// Health is the failing health check's reason while the node's own
	// checks fail (CmdHealth), "" while they pass: a drain of its own,
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
