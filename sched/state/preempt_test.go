package state

import (
	"slices"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/reason"
)

// runOne submits a one-container job and runs it on n1.
func (h *harness) runOne() uint64 {
	id := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: id, Nodes: []string{"n1"}}}}}})
	h.report("n1", id, "main1", api.ContainerRunning, 0)
	return id
}

// A requeue-mode victim is stopped, and once its container has ended it
// is back in the queue with its id, its run kept and the preemptor named.
func TestPreemptRequeue(t *testing.T) {
	h := newHarness(t)
	v := h.runOne()
	by := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	h.apply(Command{Act: Place{Plan: &Plan{Reasons: []Reason{{JobID: by, Reason: reason.Preempting}},
		Preemptions: []Preemption{{Victim: v, By: by, Mode: PreemptRequeue}}}}})
	j := h.job(v)
	if !j.KillWanted || j.Stopping() != by || j.Preempt == nil || j.Preempt.By != by || j.Preempt.At.IsZero() {
		t.Fatalf("victim after the plan: kill %v stopping %d preempt %+v; want stopped for %d", j.KillWanted, j.Stopping(), j.Preempt, by)
	}
	if p := h.job(by); !slices.Equal(p.Preempted, []uint64{v}) {
		t.Fatalf("preemptor lists %v; want [%d]", p.Preempted, v)
	}
	h.report("n1", v, "main1", api.ContainerKilled, 143)
	j = h.job(v)
	if j.State != api.JobPending || j.Requeues != 1 || len(j.Runs) != 1 || j.Reason != reason.Preempted || j.Stopping() != 0 {
		t.Fatalf("victim once stopped: %s run %d, %d runs, reason %q, stopping %d; want PENDING, run 1, 1 run, Preempted",
			j.State, j.Requeues, len(j.Runs), j.Reason, j.Stopping())
	}
	if r := j.Runs[0]; !strings.Contains(r.Reason, "preempted by job 2") || r.Containers[0].Node != "n1" || r.Started.IsZero() {
		t.Fatalf("run 0 kept as %+v; want its node and why", r)
	}
}

// A cancel-mode victim ends PREEMPTED.
func TestPreemptCancel(t *testing.T) {
	h := newHarness(t)
	v := h.runOne()
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Place{Plan: &Plan{Preemptions: []Preemption{{Victim: v, By: 2, Mode: PreemptCancel}}}}})
	h.report("n1", v, "main1", api.ContainerKilled, 143)
	if j := h.job(v); j.State != api.JobPreempted || !j.State.Terminal() {
		t.Fatalf("victim ends %s; want PREEMPTED", j.State)
	}
}

// An entry of an older schema carries no preemption: it stops nothing.
func TestPreemptOlderSchema(t *testing.T) {
	h := newHarness(t)
	v := h.runOne()
	h.apply(Command{Version: 10, Act: Place{Plan: &Plan{Preemptions: []Preemption{{Victim: v, By: 2, Mode: PreemptCancel}}}}})
	if j := h.job(v); j.KillWanted || j.Preempt != nil {
		t.Fatalf("a schema 10 entry preempted job %d", v)
	}
}
