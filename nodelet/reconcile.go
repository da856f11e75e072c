package nodelet

import (
	"context"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/session"
)

// reconcile makes the containers of this node match as:
//
//	running here, job gone or KillWanted      → stop (task reports killed)
//	not here, KillWanted, state not ended     → report killed (never started)
//	not here, state assigned (or pending)     → start a task
//	not here, state preparing/running         → report failed: lost (a
//	                                            previous nodelet ran it)
//	ended here already, or state ended        → nothing
//	not here, no lease from schedd in force   → wait (start once granted)
//	an earlier run (before a requeue) still   → wait until it has stopped
//	stopping here
//
// A container is keyed by job, host and run (the job's Requeues), and
// reports name the run, so schedd drops those about an earlier one.
func (a *agent) reconcile(ctx context.Context, as api.Assignments) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last, a.assigned = as, true
	a.reconcileLocked(ctx)
}

// reconcileLocked reconciles the last assignments; a.mu is held. A task
// that ends calls it too: a later run of its container may be waiting.
// Once ctx ends it does nothing: the nodelet is stopping, its tasks stop
// (or, detaching, leave their containers running) by themselves, and an
// answer to the assignments query or the heartbeat that comes in after
// must not find a container left running "not here" and report it lost.
// Before schedd's first answer it does nothing either (agent.assigned).
func (a *agent) reconcileLocked(ctx context.Context) {
	if ctx.Err() != nil || !a.assigned {
		return
	}
	want := map[key]api.AssignedJob{}
	for _, asg := range a.last.Assignments {
		for _, h := range asg.Hosts {
			want[key{asg.Job.ID, h, asg.Job.Requeues}] = asg.Job
		}
	}
	for k, t := range a.running {
		if job, ok := want[k]; !ok || job.KillWanted {
			t.requestStop()
		} else {
			t.queueSignals(job)
		}
	}
	for k := range a.finished {
		if _, ok := want[k]; !ok {
			delete(a.finished, k)
		}
	}
	for k, job := range want {
		if a.running[k] == nil && !a.finished[k] && !a.earlierRunHere(k) {
			a.admit(ctx, k, job)
		}
	}
}

// earlierRunHere reports whether an earlier run of k's container (before
// a requeue) is still stopping here: the new run waits for it, so the
// two never run at once. a.mu is held.
func (a *agent) earlierRunHere(k key) bool {
	for r := range a.running {
		if r.job == k.job && r.host == k.host && r.run != k.run {
			return true
		}
	}
	return false
}

// admit decides about one container not running here. a.mu is held.
func (a *agent) admit(ctx context.Context, k key, job api.AssignedJob) {
	c, err := session.Container(job, k.host)
	if err != nil {
		a.log.Error("assignment names a host the job lacks", "job", k.job, "host", k.host)
		return
	}
	switch {
	case c.State.Ended():
		return
	case job.KillWanted:
		a.endHere(k, api.ContainerKilled, 0, "killed before it started")
	case c.State == api.ContainerAssigned || c.State == api.ContainerPending || c.State == "":
		if a.fence != nil && !a.fence.valid() {
			return // the fence would kill it: start once schedd grants a lease
		}
		a.startTask(ctx, k, job)
	default:
		a.endHere(k, api.ContainerFailed, 0, "container lost: the nodelet restarted while it was "+string(c.State))
	}
}

// endedHere tells whether this nodelet has reported k's final state: its
// task reported the exit (or the failure to start), or it ended without
// a task. a.mu is held.
func (a *agent) endedHere(k key) bool {
	if a.finished[k] {
		return true
	}
	t := a.running[k]
	return t != nil && t.ended.Load()
}

// endHere reports a final state for a container that has no task. a.mu
// is held.
func (a *agent) endHere(k key, state api.ContainerState, code int, msg string) {
	a.finished[k] = true
	a.rep.Add(api.ContainerUpdate{JobID: k.job, Host: k.host, Requeues: k.run, State: state, ExitCode: code, Message: msg, At: time.Now()})
}
