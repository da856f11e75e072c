package sched

import (
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// The one place rows (state.Job, state.Node: what raft replicates) become
// the views the API answers with (api.Job, api.Node). A field a client
// sees is copied here; what the leader works out for an answer comes in
// beside the row (jobExtras) and never goes into it.

// jobExtras are what the leader's last scheduling pass says of a pending
// job: leader-local, recomputed on every pass, never in the raft log.
// The zero value adds nothing (an answer about a job that is not pending,
// or from a peer that ran no pass).
type jobExtras struct {
	start time.Time // the start estimate of a job holding a reservation
	rank  *rank     // its priority and place in its partition's queue
}

// jobView is the API's view of row j with the leader's extras.
func jobView(j *state.Job, x jobExtras) api.Job {
	v := api.Job{
		ID: j.ID, SessionID: j.SessionID, RequestID: j.RequestID, Network: j.Network,
		Name: j.Name, User: j.User, UID: j.UID, GID: j.GID, Cwd: j.Cwd,
		Partition: j.Partition, Account: j.Account, Walltime: j.Walltime, Spec: j.Spec,
		Interactive: j.Interactive, State: j.State, Reason: j.Reason, ExitCode: j.ExitCode,
		KillWanted: j.KillWanted, Cancelled: j.Cancelled, KillDone: j.KillDone, TimedOut: j.TimedOut,
		Requeues: j.Requeues, LastRequeue: j.LastRequeue, ExcludeNodes: j.ExcludeNodes, Runs: j.Runs, Containers: containerViews(j.Containers),
		Submitted: j.Submitted, Started: j.Started, Ended: j.Ended, ModifyIndex: j.ModifyIndex,
		DependsOn: j.DependsOn, Signals: j.Signals, Mailed: j.Mailed,
		CPUTime: j.CPUTime, MemPeak: j.MemPeak,
		Array: j.Array, ArrayID: j.ArrayID, ArrayIndex: j.ArrayIndex, ArraySpan: j.ArraySpan,
		EstimatedStart: x.start,
	}
	if r := x.rank; r != nil {
		f := r.factors
		v.Priority, v.PriorityFactors = f.Total, &f
		v.QueuePosition, v.QueueLength = r.pos, r.len
	}
	return v
}

// containerViews are the API's views of a row's containers.
func containerViews(cs []state.Container) []api.Container {
	if cs == nil {
		return nil
	}
	out := make([]api.Container, len(cs))
	for i := range cs {
		out[i] = cs[i].Container
	}
	return out
}

// extras are the last pass's start estimate, priority and queue position
// of j, if it is pending and the pass saw it.
func (s *scheduler) extras(j *state.Job) jobExtras {
	if j.State != api.JobPending {
		return jobExtras{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var x jobExtras
	if t, ok := s.starts[j.ID]; ok {
		x.start = t
	}
	if r, ok := s.ranks[j.ID]; ok {
		x.rank = &r
	}
	return x
}

// view is j as the leader answers with it: with its extras and its
// dependency's status.
func (s *lifecycle) view(v *state.Snapshot, j *state.Job) api.Job {
	return withDependency(v, jobView(j, s.loop.extras(j)))
}

// nodeView is the API's view of row n; what is derived (its allocation,
// partitions, GPUs, a DRAINING or DRAINED state) the caller adds. A node
// whose health check fails shows drained: by the health check, with its
// reason, unless an admin drained it too (whose drain and reason show,
// the check's reason in Health).
func nodeView(n *state.Node) api.Node {
	v := api.Node{
		Name: n.Name, Addr: n.Addr, State: n.State, Runtime: n.Runtime, OCIRuntime: n.OCIRuntime,
		Labels: n.Labels, Capacity: n.Capacity, LastHeartbeat: n.LastHeartbeat, Registered: n.Registered,
		Drain: n.Drain, DrainedBy: n.DrainedBy, DrainedAt: n.DrainedAt, Reason: n.Reason, Instance: n.Instance,
		Health: n.Health,
	}
	if n.Health != "" && !n.Drain {
		v.Drain, v.DrainedBy, v.DrainedAt, v.Reason = true, state.HealthCheckBy, n.HealthAt, n.Health
	}
	return v
}

// assignedJob is row j as a nodelet needs it (api.AssignedJob).
func assignedJob(j *state.Job) api.AssignedJob {
	return api.AssignedJob{
		ID: j.ID, SessionID: j.SessionID, Network: j.Network, Name: j.Name,
		User: j.User, UID: j.UID, GID: j.GID, Cwd: j.Cwd, Partition: j.Partition, Account: j.Account,
		Walltime: j.Walltime, Spec: j.Spec, Interactive: j.Interactive,
		KillWanted: j.KillWanted, Requeues: j.Requeues, Containers: containerViews(j.Containers),
		Signals: j.Signals, ArrayID: j.ArrayID, ArrayIndex: j.ArrayIndex, ArraySpan: j.ArraySpan,
	}
}
