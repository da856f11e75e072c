package api

import (
	"fmt"
	"maps"
	"slices"

	"github.com/troupe-hpc/troupe/internal/reason"
)

// Public is j as someone other than its owner (or an admin) sees it:
// what `bqueue -u all` and bhist need (id, user, name, partition,
// account, state, reason, times, exit code, the sizes and resources
// asked for, usage, queue rank, and the containers' hosts, states, nodes
// and node addresses, which GET /v1/nodes shows anyone), and nothing
// else. It is built by allow-list: a field not copied here, such as one
// added to Job later, stays empty, so a new field is private until it is
// classified (redact_test.go fails until it is). Withheld: the command,
// environment, mounts, services, paths (cwd, workdir, output, error, image), the
// session, request and kernel ids, the session network (VNI, subnet, the
// containers' addresses), messages, GPU devices, signals and
// dependencies.
func (j *Job) Public() Job {
	p := Job{
		ID: j.ID, Name: j.Name, User: j.User, UID: j.UID,
		Partition: j.Partition, Account: j.Account, Reservation: j.Reservation, Walltime: j.Walltime,
		Spec:        publicSpec(&j.Spec),
		Licenses:    maps.Clone(j.Licenses),
		Interactive: j.Interactive,
		State:       j.State, Reason: PublicReason(j.Reason), ExitCode: j.ExitCode,
		Submitted: j.Submitted, Started: j.Started, Ended: j.Ended,
		ModifyIndex:    j.ModifyIndex,
		EstimatedStart: j.EstimatedStart, Priority: j.Priority, QueuePosition: j.QueuePosition, QueueLength: j.QueueLength,
		CPUTime: j.CPUTime, MemPeak: j.MemPeak,
		ArrayID: j.ArrayID, ArrayIndex: j.ArrayIndex,
		SuspendedFor: j.SuspendedFor,
		QOS:          j.QOS, Preempted: slices.Clone(j.Preempted),
	}
	if s := j.Suspended; s != nil {
		// That it is suspended, since when and why (an admin's request,
		// or the job that preempted it) shows in every queue listing,
		// as bjobs -s and squeue show it.
		sp := *s
		p.Suspended = &sp
	}
	if j.Preempt != nil {
		pr := *j.Preempt
		p.Preempt = &pr
	}
	if j.Array != nil {
		a := *j.Array
		a.States = maps.Clone(a.States)
		p.Array = &a
	}
	if j.ArraySpan != nil {
		sp := *j.ArraySpan
		p.ArraySpan = &sp
	}
	if j.PriorityFactors != nil {
		f := *j.PriorityFactors
		p.PriorityFactors = &f
	}
	if j.Containers != nil {
		p.Containers = make([]Container, len(j.Containers))
		for i := range j.Containers {
			p.Containers[i] = publicContainer(&j.Containers[i])
		}
	}
	return p
}

// publicSpec keeps the job file's settings that size and place the job.
func publicSpec(s *JobSpec) JobSpec {
	return JobSpec{
		Name: s.Name, Partition: s.Partition, Account: s.Account, QOS: s.QOS,
		Walltime: s.Walltime, Priority: s.Priority, Requeue: s.Requeue,
		Cluster: s.Cluster, Resources: s.Resources, Array: s.Array, Reservation: s.Reservation,
		Licenses: maps.Clone(s.Licenses),
	}
}

// publicContainer keeps where a container runs and how it stands.
func publicContainer(c *Container) Container {
	return Container{
		ContainerSpec: ContainerSpec{Host: c.Host, Role: c.Role, Idx: c.Idx, Rank: c.Rank, Resources: c.Resources},
		CPUMilli:      c.CPUMilli, Node: c.Node, NodeAddr: c.NodeAddr, State: c.State, ExitCode: c.ExitCode,
		CPUTime: c.CPUTime, MemPeak: c.MemPeak, Ended: c.Ended,
	}
}

// PublicReason is the reason a job shows to others: the scheduler's
// pending reasons as they are; nothing else (end causes and messages may
// carry paths or a program's output).
func PublicReason(r string) string {
	if reason.IsPending(r) {
		return r
	}
	return ""
}

// Public is h as others see it (Job.Public): no signals, the public
// reason, no container messages.
func (h HistoryJob) Public() HistoryJob {
	p := h
	p.Reason = PublicReason(h.Reason)
	p.Events = nil
	for _, e := range h.Events {
		switch e.Event {
		case EventSignalled:
			continue
		case EventEnded:
			e.Detail = EndedDetail(h.State, h.ExitCode, p.Reason)
		case EventRequeued:
			e.Detail = "" // why is the reason's, withheld
		}
		p.Events = append(p.Events, e)
	}
	p.Containers = slices.Clone(h.Containers)
	for i := range p.Containers {
		p.Containers[i].Message = ""
	}
	return p
}

// EndedDetail is the detail of a job's EventEnded: its state, exit code
// and reason.
func EndedDetail(st JobState, code int, reason string) string {
	d := fmt.Sprintf("%s, exit code %d", st, code)
	if reason != "" {
		d += ": " + reason
	}
	return d
}
