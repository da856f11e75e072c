package state

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

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

// A victim to stop gets its warning signal in the entry that chooses
// it, ahead of its stop, if its file asks for one; a job that asks for
// none gets no signal; a suspended victim gets none (its warning stays
// for its walltime) and is suspended in that same entry, to resume by
// itself. Resumed, its preemption is over.
func TestPreemptWarnsVictims(t *testing.T) {
	h := newHarness(t)
	usr1 := &Warning{Signal: "USR1", Before: time.Minute}
	warned := h.running(1, time.Hour, usr1)
	plain := h.running(1, time.Hour, nil)
	frozen := h.running(1, time.Hour, usr1)
	by := h.apply(Command{Act: Submit{Jobs: []*Job{session(3)}}}).([]uint64)[0]
	h.apply(Command{Act: Place{Plan: &Plan{Preemptions: []Preemption{
		{Victim: warned, By: by, Mode: PreemptRequeue}, {Victim: plain, By: by, Mode: PreemptCancel},
		{Victim: frozen, By: by, Mode: PreemptSuspend}}}}})
	at := t0.Add(time.Duration(h.idx) * time.Second)
	if j := h.job(warned); !j.KillWanted || j.Warned != at || len(j.Signals) != 1 || j.Signals[0].Signal != int(syscall.SIGUSR1) || j.Signals[0].Host != "main1" {
		t.Errorf("requeue victim: kill %v warned %v signals %+v; want USR1 to main1 in the entry that stops it", j.KillWanted, j.Warned, j.Signals)
	}
	if j := h.job(plain); !j.KillWanted || len(j.Signals) != 0 || !j.Warned.IsZero() {
		t.Errorf("victim without a warning: kill %v signals %+v", j.KillWanted, j.Signals)
	}
	j := h.job(frozen)
	if j.KillWanted || len(j.Signals) != 0 || j.Suspended == nil || j.Suspended.Since != at || !j.Suspended.ResumeWanted ||
		j.Stopping() != by || j.ResumeWaitsOn() != by {
		t.Fatalf("suspend victim: kill %v signals %+v suspended %+v stopping %d; want suspended in the same entry, unsignalled",
			j.KillWanted, j.Signals, j.Suspended, j.Stopping())
	}
	h.apply(Command{Act: Resumed{Jobs: []uint64{frozen}}})
	if j := h.job(frozen); j.Suspended != nil || j.Preempt.Resumed.IsZero() || j.Stopping() != 0 || j.ResumeWaitsOn() != 0 || j.WarnAt().IsZero() {
		t.Errorf("resumed victim: suspended %+v preempt %+v stopping %d warn at %v; want its preemption over, its warning still due",
			j.Suspended, j.Preempt, j.Stopping(), j.WarnAt())
	}
}
