package state

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// applyAt applies c with the leader's clock at t0+at.
func (h *harness) applyAt(at time.Duration, c Command) {
	h.t.Helper()
	h.idx++
	c.Time, c.Version = t0.Add(at), SchemaVersion
	if _, err := h.st.Apply(h.idx, c); err != nil {
		h.t.Fatalf("apply %s: %v", c.Kind(), err)
	}
}

// runOn submits a one-container job and runs it on node.
func (h *harness) runOn(node string, requeue bool, warn *Warning) uint64 {
	h.t.Helper()
	j := session(1)
	j.Spec.Requeue, j.Spec.Signal = requeue, warn
	id := h.apply(Command{Act: Submit{Jobs: []*Job{j}}}).([]uint64)[0]
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: id, Nodes: []string{node}}}}}})
	h.report(node, id, "main1", api.ContainerRunning, 0)
	return id
}

// resvHarness runs a requeue job with a warning and a plain job on n1
// and a job on n2, then makes reservation pm of n1 from t0+1h for an
// hour, stop_jobs as stop says (ignore_jobs otherwise).
func resvHarness(t *testing.T, stop bool) (h *harness, requeued, cancelled, elsewhere uint64) {
	h = newHarness(t)
	h.apply(Command{Act: Register{Node: &Node{Name: "n2", Addr: "10.0.0.2", Capacity: Resources{CPUMilli: 4000, Memory: 8 << 30}}}})
	requeued = h.runOn("n1", true, &Warning{Signal: "USR1", Before: time.Minute})
	cancelled = h.runOn("n1", false, nil)
	elsewhere = h.runOn("n2", false, nil)
	r := &Reservation{Name: "pm", Start: t0.Add(time.Hour), Duration: time.Hour, Nodes: []string{"n1"}, Maint: true, StopJobs: stop, IgnoreJobs: !stop}
	h.apply(Command{Act: CreateReservation{Reservation: r}})
	return h, requeued, cancelled, elsewhere
}

// With stop_jobs, as the window opens the jobs running on its nodes are
// stopped once: a requeue job gets its warning and goes back to the
// queue with its id and a new run, another ends CANCELLED naming the
// reservation; a job on another node runs on.
func TestReservationStopsJobs(t *testing.T) {
	h, rq, cn, other := resvHarness(t, true)
	if g := h.st.Snapshot().Reservation("pm"); !slices.Contains(g.Flags(), "stop_jobs") {
		t.Fatalf("flags %v; want stop_jobs", g.Flags())
	}
	if name, ids := h.st.Snapshot().InTheWay(t0.Add(59 * time.Minute)); len(ids) != 0 {
		t.Fatalf("before the window: %s stops %v", name, ids)
	}
	name, ids := h.st.Snapshot().InTheWay(t0.Add(time.Hour))
	if name != "pm" || !slices.Equal(ids, []uint64{rq, cn}) {
		t.Fatalf("at the window: %q stops %v; want pm stopping [%d %d]", name, ids, rq, cn)
	}
	// A late entry, once the window has closed, stops nothing.
	h.applyAt(2*time.Hour+time.Second, Command{Act: StopReserved{Reservation: "pm", Jobs: ids}})
	if j := h.job(rq); j.KillWanted || j.Preempt != nil {
		t.Fatalf("an entry after the window stopped job %d", rq)
	}
	h.applyAt(time.Hour, Command{Act: StopReserved{Reservation: "pm", Jobs: append(ids, other)}})
	for _, id := range ids {
		j := h.job(id)
		if !j.KillWanted || j.Preempt == nil || j.Preempt.Reservation != "pm" || j.Stopping() != 0 {
			t.Fatalf("job %d at the window: kill %v preempt %+v; want stopping for pm", id, j.KillWanted, j.Preempt)
		}
	}
	if j := h.job(rq); len(j.Signals) != 1 || j.Warned.IsZero() {
		t.Fatalf("requeue job's warning: signals %+v warned %v; want its USR1 once", j.Signals, j.Warned)
	}
	if j := h.job(other); j.KillWanted || j.Preempt != nil {
		t.Fatalf("job %d on n2 stopped", other)
	}
	if _, again := h.st.Snapshot().InTheWay(t0.Add(time.Hour + time.Minute)); len(again) != 0 {
		t.Fatalf("stopping jobs are picked again: %v", again)
	}
	before := h.job(rq).ModifyIndex
	h.applyAt(time.Hour+time.Minute, Command{Act: StopReserved{Reservation: "pm", Jobs: ids}})
	if j := h.job(rq); j.ModifyIndex != before || len(j.Signals) != 1 {
		t.Fatalf("a second stop changed job %d", rq)
	}

	h.report("n1", rq, "main1", api.ContainerKilled, 143)
	j := h.job(rq)
	if j.State != api.JobPending || j.Requeues != 1 || len(j.Runs) != 1 || !strings.Contains(j.Runs[0].Reason, "reservation pm") {
		t.Fatalf("requeue job once stopped: %s, run %d, runs %+v; want PENDING, run 1, run 0 naming pm", j.State, j.Requeues, j.Runs)
	}
	h.report("n1", cn, "main1", api.ContainerKilled, 143)
	if j := h.job(cn); j.State != api.JobCancelled || !strings.Contains(j.Reason, "reservation pm") {
		t.Fatalf("other job once stopped: %s %q; want CANCELLED naming pm", j.State, j.Reason)
	}
	if j := h.job(other); j.State != api.JobRunning {
		t.Fatalf("job %d on n2 is %s", other, j.State)
	}
	if _, again := h.st.Snapshot().InTheWay(t0.Add(time.Hour + 2*time.Minute)); len(again) != 0 {
		t.Fatalf("stopped jobs are picked again: %v", again)
	}
}

// Without stop_jobs the running jobs are left alone: none is in the
// way, and an entry naming them stops nothing.
func TestReservationLeavesJobs(t *testing.T) {
	h, rq, cn, _ := resvHarness(t, false)
	if name, ids := h.st.Snapshot().InTheWay(t0.Add(time.Hour)); len(ids) != 0 {
		t.Fatalf("without stop_jobs %s stops %v", name, ids)
	}
	h.applyAt(time.Hour, Command{Act: StopReserved{Reservation: "pm", Jobs: []uint64{rq, cn}}})
	for _, id := range []uint64{rq, cn} {
		if j := h.job(id); j.KillWanted || j.Preempt != nil || len(j.Signals) != 0 {
			t.Fatalf("job %d stopped by a reservation without stop_jobs", id)
		}
	}
}

// The act is a reservation's: schema 11, with no older form; it reads
// back from its entry.
func TestStopReservedEntry(t *testing.T) {
	c := Command{Version: SchemaVersion, Time: t0, Act: StopReserved{Reservation: "pm", Jobs: []uint64{3}, Requeue: []string{"gpu"}}}
	if n := c.NeedsSchema(); n != SchemaReservations {
		t.Fatalf("needs schema %d; want %d", n, SchemaReservations)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Command
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if a, ok := back.Act.(StopReserved); !ok || a.Reservation != "pm" || !slices.Equal(a.Jobs, []uint64{3}) || !slices.Equal(a.Requeue, []string{"gpu"}) {
		t.Fatalf("read back %+v", back.Act)
	}
	c.Version = 10
	if _, err := json.Marshal(c); err == nil {
		t.Fatal("written in schema 10")
	}
}
