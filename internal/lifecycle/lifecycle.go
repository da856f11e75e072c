// Package lifecycle names where a job, a container and a node stand:
// the states the replicated state (sched/state) stores in its rows and
// the API (internal/api) shows, and the signals that end a job before it
// runs. It is a leaf: plain values and their rules, importing nothing of
// troupe's, so that the rows and the views share the words without the
// state depending on the API's types (the API names these types as its
// own: api.JobState is lifecycle.JobState).
package lifecycle

import (
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// JobState is where a job stands in its lifecycle (docs/ARCHITECTURE.md,
// "The life of a job"; bqueue(1), STATE).
type JobState string

// Job states.
const (
	JobPending   JobState = "PENDING"
	JobHeld      JobState = "HELD"
	JobScheduled JobState = "SCHEDULED"
	JobPreparing JobState = "PREPARING"
	JobRunning   JobState = "RUNNING"
	JobCompleted JobState = "COMPLETED"
	JobFailed    JobState = "FAILED"
	JobCancelled JobState = "CANCELLED"
	JobTimeout   JobState = "TIMEOUT"
	JobNodeFail  JobState = "NODE_FAIL"
	// JobPreempted: the job was stopped for a more urgent one, its
	// partition's (or QOS's) preempt_mode being cancel.
	JobPreempted JobState = "PREEMPTED"
	// JobRequeued is the state of an earlier run of a job in history: a
	// node failure ended that run and put the job back in the queue. No
	// job is ever in it; its record is (Slurm's sacct shows such a run
	// as REQUEUED too).
	JobRequeued JobState = "REQUEUED"
)

// Terminal reports whether no further transition can happen.
func (s JobState) Terminal() bool {
	switch s {
	case JobCompleted, JobFailed, JobCancelled, JobTimeout, JobNodeFail, JobPreempted:
		return true
	}
	return false
}

// ContainerState is where one container of a session stands.
type ContainerState string

// Container states.
const (
	ContainerPending   ContainerState = "pending"   // not yet placed
	ContainerAssigned  ContainerState = "assigned"  // placed, nodelet not started
	ContainerPreparing ContainerState = "preparing" // nodelet building bundle
	ContainerRunning   ContainerState = "running"
	ContainerExited    ContainerState = "exited" // ExitCode set
	ContainerFailed    ContainerState = "failed" // could not start; Message says why
	ContainerKilled    ContainerState = "killed" // stopped by the session's end or bkill
	ContainerOOM       ContainerState = "oom"    // killed by the kernel for exceeding its memory limit
)

// Ended reports whether the container is no longer running.
func (s ContainerState) Ended() bool {
	return s == ContainerExited || s == ContainerFailed || s == ContainerKilled || s == ContainerOOM
}

// NodeState is a node's health.
type NodeState string

// Node states.
const (
	NodeUp   NodeState = "UP"
	NodeDown NodeState = "DOWN"
	// A drained node (badmin drain) takes no new work: DRAINING while
	// jobs still run there, DRAINED once empty (derived when answering).
	NodeDraining NodeState = "DRAINING"
	NodeDrained  NodeState = "DRAINED"
	// NodeMaint: a maintenance reservation's window is open on the node
	// (derived when answering): only that reservation's jobs start there.
	NodeMaint NodeState = "MAINT"
	// NodeReserved: another reservation's window is open on the node
	// (derived when answering).
	NodeReserved NodeState = "RESERVED"
)

// Cancels reports whether sig, sent to a job that does not run yet,
// cancels it (KILL, TERM, INT), as LSF's bkill -s does.
func Cancels(sig syscall.Signal) bool {
	return sig == syscall.SIGKILL || sig == syscall.SIGTERM || sig == syscall.SIGINT
}

// SignalName is sig's name without SIG ("USR1"), or its number.
func SignalName(sig int) string {
	if n := unix.SignalName(syscall.Signal(sig)); n != "" {
		return strings.TrimPrefix(n, "SIG")
	}
	return strconv.Itoa(sig)
}
