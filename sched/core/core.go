// Package core is the scheduler's pure heart: given a snapshot of the
// cluster and the time, it returns a plan. It has no clock, no I/O, no
// global state and no randomness, so schedd and the simulator run the very
// same code and tests can replay it step by step.
//
//	Snapshot{Nodes, Queue} ──► for each job in queue order:
//	                              gang placement (Place) ── fits ──► Placement
//	                                      │ does not fit
//	                                      ▼
//	                              pending reason (Resources, then Priority
//	                              for every job behind it: strict FIFO)
//	                           ──► Plan{Placements, Reasons}
//
// Fair share, backfill and partitions deepen this package; the contract
// (snapshot + now → plan) stays.
package core

import (
	"time"
)

// Pending reasons the core gives (the same strings as api.Reason*).
const (
	ReasonResources = "Resources"
	ReasonPriority  = "Priority"
)

// Cluster modes (the same strings as jobspec.Mode*).
const (
	ModeSingleNode = "single-node"
	ModeMultiNode  = "multi-node"
)

// Res is an amount of schedulable resources.
type Res struct {
	CPUMilli int64
	Memory   int64 // bytes
	GPU      float64
}

// Add returns r + o.
func (r Res) Add(o Res) Res {
	return Res{r.CPUMilli + o.CPUMilli, r.Memory + o.Memory, r.GPU + o.GPU}
}

// Sub returns r - o.
func (r Res) Sub(o Res) Res {
	return Res{r.CPUMilli - o.CPUMilli, r.Memory - o.Memory, r.GPU - o.GPU}
}

// Covers reports whether r has room for o.
func (r Res) Covers(o Res) bool {
	const eps = 1e-9
	return r.CPUMilli >= o.CPUMilli && r.Memory >= o.Memory && r.GPU+eps >= o.GPU
}

// Node is a node's view for placement.
type Node struct {
	Name     string
	Capacity Res
	Free     Res
}

// Job is a queued job's view for placement.
type Job struct {
	ID         uint64
	Mode       string
	Containers []Res  // per container, rank order
	Reason     string // current pending reason, to report only changes
}

// Snapshot is everything the core may look at. Queue is in scheduling
// order; Nodes only lists nodes that may take work.
type Snapshot struct {
	Nodes []Node
	Queue []Job
}

// Placement puts every container of one job: Nodes[i] holds container i.
type Placement struct {
	JobID uint64
	Nodes []string
}

// ReasonChange sets a pending job's reason.
type ReasonChange struct {
	JobID  uint64
	Reason string
}

// Plan is the core's answer. An empty plan means nothing to do.
type Plan struct {
	Placements []Placement
	Reasons    []ReasonChange
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return len(p.Placements) == 0 && len(p.Reasons) == 0 }

// Schedule walks the queue in order and places every job that fits now,
// strict FIFO: the first job that does not fit waits for Resources and
// every job behind it waits for Priority. now is unused until walltime
// and age enter the picture; it is part of the contract.
func Schedule(s Snapshot, now time.Time) Plan {
	_ = now
	nodes := make([]Node, len(s.Nodes))
	copy(nodes, s.Nodes)
	var plan Plan
	blocked := false
	for _, j := range s.Queue {
		if !blocked {
			if hosts, ok := Place(nodes, j); ok {
				plan.Placements = append(plan.Placements, Placement{JobID: j.ID, Nodes: hosts})
				take(nodes, j, hosts)
				continue
			}
			blocked = true
			plan.setReason(j, ReasonResources)
			continue
		}
		plan.setReason(j, ReasonPriority)
	}
	return plan
}

func (p *Plan) setReason(j Job, reason string) {
	if j.Reason != reason {
		p.Reasons = append(p.Reasons, ReasonChange{JobID: j.ID, Reason: reason})
	}
}

// take charges a placed job to the nodes.
func take(nodes []Node, j Job, hosts []string) {
	for i, h := range hosts {
		for k := range nodes {
			if nodes[k].Name == h {
				nodes[k].Free = nodes[k].Free.Sub(j.Containers[i])
				break
			}
		}
	}
}

// CanEverFit reports whether the job fits the nodes when all are empty.
func CanEverFit(nodes []Node, j Job) bool {
	empty := make([]Node, len(nodes))
	for i, n := range nodes {
		empty[i] = Node{Name: n.Name, Capacity: n.Capacity, Free: n.Capacity}
	}
	_, ok := Place(empty, j)
	return ok
}
