package sched

import (
	"slices"
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
		ID: j.ID, SessionID: j.SessionID, RequestID: j.RequestID, Network: networkView(j.Network),
		Name: j.Name, User: j.User, UID: j.UID, GID: j.GID, Cwd: j.Cwd,
		Partition: j.Partition, Account: j.Account, Reservation: j.Reservation, Walltime: j.Walltime, Spec: specView(j), Licenses: j.Licenses,
		Interactive: j.Interactive, State: j.State, Reason: j.Reason, ExitCode: j.ExitCode,
		KillWanted: j.KillWanted, Cancelled: j.Cancelled, KillDone: j.KillDone, TimedOut: j.TimedOut,
		Requeues: j.Requeues, LastRequeue: j.LastRequeue, ExcludeNodes: slices.Clone(j.ExcludeNodes), Runs: runViews(j.Runs), Containers: containerViews(j.Containers),
		Submitted: j.Submitted, Started: j.Started, Ended: j.Ended, ModifyIndex: j.ModifyIndex,
		DependsOn: dependencyView(j.DependsOn), Signals: signalViews(j.Signals), Mailed: j.Mailed,
		Suspended: suspensionView(j.Suspended), SuspendedFor: j.SuspendedFor, Warned: j.Warned,
		CPUTime: j.CPUTime, MemPeak: j.MemPeak,
		Array: arrayView(j.Array), ArrayID: j.ArrayID, ArrayIndex: j.ArrayIndex, ArraySpan: spanView(j.ArraySpan),
		EstimatedStart: x.start,
		QOS:            j.QOS, Preempt: preemptView(j.Preempt), Preempted: j.Preempted,
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
		c := &cs[i]
		out[i] = api.Container{
			ContainerSpec: api.ContainerSpec{Host: c.Host, Role: c.Role, Idx: c.Idx, Rank: c.Rank, Image: c.Image, Command: c.Command,
				Resources: jobResources(c)},
			CPUMilli: c.CPUMilli, KernelID: c.KernelID, Node: c.Node, NodeAddr: c.NodeAddr, Addr: c.Addr, Reach: c.Reach,
			State: c.State, ExitCode: c.ExitCode, Message: c.Message, GPUs: gpuViews(c.GPUs),
			CPUTime: c.CPUTime, MemPeak: c.MemPeak, Ended: c.Ended,
		}
	}
	return out
}

// specView is the job's spec as the API shows row j's: what the row
// keeps of its job file, with the walltime, partition and account in
// force and main1's resources as the job's.
func specView(j *state.Job) api.JobSpec {
	s := &j.Spec
	v := api.JobSpec{
		Name: j.Name, Partition: j.Partition, Account: j.Account, Reservation: j.Reservation, Walltime: j.Walltime,
		Priority: s.Priority, Requeue: s.Requeue, SSH: s.SSH,
		Cluster: api.Cluster(s.Cluster),
		Image:   s.Image, Command: s.Command, Workdir: s.Workdir, Env: s.Env,
		Output: s.Output, Error: s.Error, Licenses: j.Licenses,
	}
	if len(j.Containers) > 0 {
		v.Resources = jobResources(&j.Containers[0])
	}
	for _, m := range s.Mounts {
		v.Mounts = append(v.Mounts, api.Mount(m))
	}
	for _, sv := range s.Services {
		v.Services = append(v.Services, api.Service(sv))
	}
	if s.Array != nil {
		v.Array = &api.ArraySpec{Range: s.Array.Range, MaxRunning: s.Array.MaxRunning}
	}
	if s.Mail != nil {
		m := api.Mail(*s.Mail)
		v.Mail = &m
	}
	if s.Signal != nil {
		w := api.Warning(*s.Signal)
		v.Signal = &w
	}
	return v
}

// suspensionView is a job's suspension as the API shows it (nil: none).
func suspensionView(s *state.Suspension) *api.Suspension {
	if s == nil {
		return nil
	}
	v := api.Suspension(*s)
	return &v
}

// jobResources are c's resources as a job file writes them (cores).
func jobResources(c *state.Container) api.JobResources {
	return api.JobResources{CPU: float64(c.CPUMilli) / 1000, Memory: c.Memory, GPU: c.GPU}
}

func networkView(n *state.Network) *api.Network {
	if n == nil {
		return nil
	}
	v := api.Network(*n)
	return &v
}

func gpuViews(gs []state.GPUShare) []api.GPUShare {
	if gs == nil {
		return nil
	}
	out := make([]api.GPUShare, len(gs))
	for i, g := range gs {
		out[i] = api.GPUShare(g)
	}
	return out
}

func signalViews(ss []state.SignalRequest) []api.SignalRequest {
	if ss == nil {
		return nil
	}
	out := make([]api.SignalRequest, len(ss))
	for i, s := range ss {
		out[i] = api.SignalRequest(s)
	}
	return out
}

func spanView(s *state.ArraySpan) *api.ArraySpan {
	if s == nil {
		return nil
	}
	v := api.ArraySpan(*s)
	return &v
}

func arrayView(a *state.Array) *api.Array {
	if a == nil {
		return nil
	}
	v := api.Array(*a)
	return &v
}

// dependencyView is a row's dependency as the API shows it, before its
// statuses are filled in (withDependency).
func dependencyView(d *state.Dependency) *api.Dependency {
	if d == nil {
		return nil
	}
	v := &api.Dependency{Any: d.Any, Conditions: make([]api.Condition, len(d.Conditions))}
	for i, c := range d.Conditions {
		v.Conditions[i] = conditionView(c)
	}
	return v
}

func conditionView(c state.Condition) api.Condition {
	return api.Condition{Kind: api.DepKind(c.Kind), JobID: c.JobID, Index: c.Index}
}

// runContainerView is a container of an earlier run as history shows it.
func runContainerView(c state.RunContainer) api.HistoryContainer { return api.HistoryContainer(c) }

func runView(r state.Run) api.JobRun {
	v := api.JobRun{Started: r.Started, Ended: r.Ended, Reason: r.Reason, ExitCode: r.ExitCode, CPUTime: r.CPUTime, MemPeak: r.MemPeak}
	if r.Containers != nil {
		v.Containers = make([]api.HistoryContainer, len(r.Containers))
		for i, c := range r.Containers {
			v.Containers[i] = runContainerView(c)
		}
	}
	return v
}

func runViews(rs []state.Run) []api.JobRun {
	if rs == nil {
		return nil
	}
	out := make([]api.JobRun, len(rs))
	for i, r := range rs {
		out[i] = runView(r)
	}
	return out
}

func resourcesView(r state.Resources) api.Resources { return api.Resources(r) }

func tokenView(t *state.Token) *api.Token {
	v := api.Token(*t)
	return &v
}

func tokenRow(t *api.Token) *state.Token {
	r := state.Token(*t)
	return &r
}

// extras are the last pass's start estimate of j, and its priority and
// queue position as the last pass ranked (worked out now), if it is
// pending.
func (s *scheduler) extras(j *state.Job) jobExtras {
	if j.State != api.JobPending {
		return jobExtras{}
	}
	var x jobExtras
	s.mu.Lock()
	if t, ok := s.starts[j.ID]; ok {
		x.start = t
	}
	s.mu.Unlock()
	if r, ok := s.backlog.rank(j); ok {
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
		Labels: n.Labels, Capacity: resourcesView(n.Capacity), LastHeartbeat: n.LastHeartbeat, Registered: n.Registered,
		Drain: n.Drain, DrainedBy: n.DrainedBy, DrainedAt: n.DrainedAt, Reason: n.Reason, Instance: n.Instance,
		Health: n.Health, HealthAt: n.HealthAt,
	}
	if n.Health != "" && !n.Drain {
		v.Drain, v.DrainedBy, v.DrainedAt, v.Reason = true, state.HealthCheckBy, n.HealthAt, n.Health
	}
	return v
}

// assignedJob is row j as a nodelet needs it (api.AssignedJob).
func assignedJob(j *state.Job) api.AssignedJob {
	return api.AssignedJob{
		ID: j.ID, SessionID: j.SessionID, Network: networkView(j.Network), Name: j.Name,
		User: j.User, UID: j.UID, GID: j.GID, Cwd: j.Cwd, Partition: j.Partition, Account: j.Account,
		Walltime: j.Walltime, Spec: specView(j), Interactive: j.Interactive,
		KillWanted: j.KillWanted, Requeues: j.Requeues, Containers: containerViews(j.Containers),
		Signals: signalViews(j.Signals), Suspended: suspensionView(j.Suspended),
		ArrayID: j.ArrayID, ArrayIndex: j.ArrayIndex, ArraySpan: spanView(j.ArraySpan),
	}
}

// assignedRow is a node's copy of its job (what assignedJob gave it) as
// a row: the job a node announces during the adoption window after a
// restore, which the state adopts.
func assignedRow(a *api.AssignedJob) *state.Job {
	j := &state.Job{ID: a.ID, SessionID: a.SessionID, Name: a.Name, User: a.User, UID: a.UID, GID: a.GID, Cwd: a.Cwd,
		Partition: a.Partition, Account: a.Account, Reservation: a.Spec.Reservation, Walltime: a.Walltime, Interactive: a.Interactive,
		KillWanted: a.KillWanted, Requeues: a.Requeues, ArrayID: a.ArrayID, ArrayIndex: a.ArrayIndex}
	if a.Network != nil {
		n := state.Network(*a.Network)
		j.Network = &n
	}
	if a.ArraySpan != nil {
		sp := state.ArraySpan(*a.ArraySpan)
		j.ArraySpan = &sp
	}
	for _, s := range a.Signals {
		j.Signals = append(j.Signals, state.SignalRequest(s))
	}
	s := &a.Spec
	j.Spec = state.Spec{Priority: s.Priority, Requeue: s.Requeue, SSH: s.SSH, Cluster: state.Cluster(s.Cluster),
		Image: s.Image, Command: s.Command, Workdir: s.Workdir, Env: s.Env, Output: s.Output, Error: s.Error}
	for _, m := range s.Mounts {
		j.Spec.Mounts = append(j.Spec.Mounts, state.Mount(m))
	}
	for _, sv := range s.Services {
		j.Spec.Services = append(j.Spec.Services, state.Service(sv))
	}
	if s.Array != nil {
		j.Spec.Array = &state.ArrayRequest{Range: s.Array.Range, MaxRunning: s.Array.MaxRunning}
	}
	if s.Mail != nil {
		m := state.Mail(*s.Mail)
		j.Spec.Mail = &m
	}
	if s.Signal != nil {
		w := state.Warning(*s.Signal)
		j.Spec.Signal = &w
	}
	if a.Suspended != nil {
		sp := state.Suspension(*a.Suspended)
		j.Suspended = &sp
	}
	for i := range a.Containers {
		c := &a.Containers[i]
		rc := state.Container{Host: c.Host, Role: c.Role, Idx: c.Idx, Rank: c.Rank, Image: c.Image, Command: c.Command,
			CPUMilli: c.Milli(), Memory: c.Resources.Memory, GPU: c.Resources.GPU, KernelID: c.KernelID,
			Node: c.Node, NodeAddr: c.NodeAddr, Addr: c.Addr, Reach: c.Reach, State: c.State, ExitCode: c.ExitCode,
			Message: c.Message, CPUTime: c.CPUTime, MemPeak: c.MemPeak, Ended: c.Ended}
		for _, g := range c.GPUs {
			rc.GPUs = append(rc.GPUs, state.GPUShare(g))
		}
		j.Containers = append(j.Containers, rc)
	}
	return j
}

// preemptView is a row's last preemption as the API shows it.
func preemptView(p *state.PreemptRecord) *api.Preemption {
	if p == nil {
		return nil
	}
	return &api.Preemption{By: p.By, At: p.At, Mode: p.Mode, Run: p.Run, Resumed: p.Resumed, Reservation: p.Reservation}
}
