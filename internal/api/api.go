// Package api holds the wire types of schedd's HTTP/JSON /v1 API, shared by
// schedd, nodelet and the command-line tools.
//
// Endpoints (all JSON; errors are {"error": "..."} with a 4xx/5xx status):
//
//	POST /v1/jobs                      SubmitRequest → SubmitResponse
//	GET  /v1/jobs[?index=N&wait=30s]   → JobList (blocking when index given)
//	GET  /v1/jobs/{id}                 → Job
//	POST /v1/jobs/{id}/kill            → Job
//	GET  /v1/nodes                     → NodeList
//	POST /v1/nodes/register            NodeRegister → Node
//	POST /v1/nodes/{name}/heartbeat    → {}
//	GET  /v1/nodes/{name}/assignments?index=N&wait=30s → Assignments
//	POST /v1/nodes/{name}/status       ContainerReport → {}
//
// Blocking queries: the response carries header X-Troupe-Index; a request
// with ?index=N waits (up to wait) until the state index exceeds N.
package api

import (
	"time"

	"github.com/troupe-hpc/troupe/jobspec"
)

// IndexHeader carries the state index a response reflects.
const IndexHeader = "X-Troupe-Index"

// JobState is where a job stands in its lifecycle (DESIGN.md).
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
)

// Terminal reports whether no further transition can happen.
func (s JobState) Terminal() bool {
	switch s {
	case JobCompleted, JobFailed, JobCancelled, JobTimeout, JobNodeFail:
		return true
	}
	return false
}

// Pending reasons, as Slurm names them.
const (
	ReasonResources      = "Resources"
	ReasonPriority       = "Priority"
	ReasonPartitionLimit = "PartitionLimit"
	ReasonAccountLimit   = "AccountLimit"
	ReasonDependency     = "Dependency"
	ReasonHeld           = "Held"
)

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
)

// Ended reports whether the container is no longer running.
func (s ContainerState) Ended() bool {
	return s == ContainerExited || s == ContainerFailed || s == ContainerKilled
}

// SubmitRequest is what bsub sends.
type SubmitRequest struct {
	Spec   jobspec.Job `json:"spec"`
	Cwd    string      `json:"cwd"`            // submit directory; relative output paths resolve here
	User   string      `json:"user,omitempty"` // informational; schedd trusts UID/GID
	UID    int         `json:"uid"`
	GID    int         `json:"gid"`
	Source string      `json:"source,omitempty"` // job file name, for messages
}

// SubmitResponse answers a submission.
type SubmitResponse struct {
	JobID     uint64 `json:"job_id"`
	Partition string `json:"partition"`
}

// Job is a job as schedd keeps it.
type Job struct {
	ID          uint64      `json:"id"`
	SessionID   string      `json:"session_id"` // equals main1's kernel id
	Network     *Network    `json:"network,omitempty"`
	Name        string      `json:"name"`
	User        string      `json:"user"`
	UID         int         `json:"uid"`
	GID         int         `json:"gid"`
	Cwd         string      `json:"cwd"`
	Partition   string      `json:"partition"`
	Spec        jobspec.Job `json:"spec"`
	State       JobState    `json:"state"`
	Reason      string      `json:"reason,omitempty"`      // pending reason or end cause
	ExitCode    int         `json:"exit_code"`             // main1's, once ended
	KillWanted  bool        `json:"kill_wanted,omitempty"` // bkill or session end: nodelets stop containers
	Cancelled   bool        `json:"cancelled,omitempty"`   // bkill asked for it; the job ends CANCELLED
	Containers  []Container `json:"containers"`
	Submitted   time.Time   `json:"submitted"`
	Started     time.Time   `json:"started,omitzero"`
	Ended       time.Time   `json:"ended,omitzero"`
	ModifyIndex uint64      `json:"modify_index"`
}

// Container is one container of a job's session.
type Container struct {
	jobspec.Container
	KernelID string         `json:"kernel_id"`
	Node     string         `json:"node,omitempty"`
	NodeAddr string         `json:"node_addr,omitempty"` // address other containers reach it at
	Addr     string         `json:"addr,omitempty"`      // the container's address on its session network
	State    ContainerState `json:"state"`
	ExitCode int            `json:"exit_code"`
	Message  string         `json:"message,omitempty"`
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

// NodeState is a node's health.
type NodeState string

// Node states.
const (
	NodeUp   NodeState = "UP"
	NodeDown NodeState = "DOWN"
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
	Runtime  string    `json:"runtime"` // runc | process
}

// Node is a node as schedd keeps it.
type Node struct {
	Name          string    `json:"name"`
	Addr          string    `json:"addr"`
	State         NodeState `json:"state"`
	Runtime       string    `json:"runtime"`
	Capacity      Resources `json:"capacity"`
	Allocated     Resources `json:"allocated"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	Registered    time.Time `json:"registered"`
}

// NodeList lists nodes.
type NodeList struct {
	Nodes []Node `json:"nodes"`
	Index uint64 `json:"index"`
}

// Assignment is one job's containers on one node, with the whole session
// so the nodelet can write /etc/hosts and the environment.
type Assignment struct {
	Job Job `json:"job"` // full job, all containers (other nodes' too)
	// Hosts are the container hostnames placed on this node.
	Hosts []string `json:"hosts"`
}

// Assignments is what a nodelet should be running now. A job whose
// KillWanted is set must have its containers stopped. A running container
// that is in no assignment must be stopped.
type Assignments struct {
	Assignments []Assignment `json:"assignments"`
	Index       uint64       `json:"index"`
}

// ContainerReport is a nodelet's report on its containers.
type ContainerReport struct {
	Updates []ContainerUpdate `json:"updates"`
}

// ContainerUpdate reports one container's state.
type ContainerUpdate struct {
	JobID    uint64         `json:"job_id"`
	Host     string         `json:"host"`
	State    ContainerState `json:"state"`
	ExitCode int            `json:"exit_code"`
	Message  string         `json:"message,omitempty"`
}

// Error is the body of every non-2xx response.
type Error struct {
	Error string `json:"error"`
}
