package state

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

func arrayJob(rng string, maxRunning int) *Job {
	j := session(1)
	j.Spec.Array = &ArrayRequest{Range: rng, MaxRunning: maxRunning}
	j.SessionID = "6f1c0a52-1d3e-4f5b-9a2b-3c4d5e6f7a8b"
	return j
}

// checkCounts fails unless the array's counts add up to its size and
// match its element rows (elements without a row counted PENDING, or
// HELD in a held array).
func checkCounts(t *testing.T, st *Store, id uint64) *Job {
	t.Helper()
	v := st.Snapshot()
	p := v.Job(id)
	sum := 0
	for _, n := range p.Array.States {
		sum += n
	}
	if sum != p.Array.Count {
		t.Fatalf("array %d: counts %v add up to %d, not %d", id, p.Array.States, sum, p.Array.Count)
	}
	rows := map[api.JobState]int{}
	for _, e := range v.Elements(id) {
		rows[e.State]++
	}
	for s, n := range rows {
		extra, waiting := 0, api.JobPending
		if p.Array.Held {
			waiting = api.JobHeld
		}
		if s == waiting {
			extra = unmade(p.Array)
		}
		if s.Terminal() && p.Cancelled && p.Array.States[s] >= n {
			continue // a killed array's elements without a row ended without one
		}
		if p.Array.States[s] != n+extra {
			t.Fatalf("array %d: %d %s by the counts, %d rows (+%d without one): %v", id, p.Array.States[s], s, n, extra, p.Array.States)
		}
	}
	return p
}

func TestArrayWindowAndThrottle(t *testing.T) {
	h := newHarness(t)
	id := h.apply(Command{Act: Submit{Jobs: []*Job{arrayJob("1-1000", 0)}}}).([]uint64)[0]
	p := checkCounts(t, h.st, id)
	if n := len(h.st.Snapshot().Elements(id)); n != ArrayWindow || p.State != api.JobPending {
		t.Fatalf("a fresh array of 1000 has %d element rows and is %s; want %d PENDING", n, p.State, ArrayWindow)
	}
	// The next submit's id follows the elements'.
	if next := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]; next != id+ArrayWindow+1 {
		t.Fatalf("next job id %d, want %d", next, id+ArrayWindow+1)
	}

	tid := h.apply(Command{Act: Submit{Jobs: []*Job{arrayJob("1-10", 3)}}}).([]uint64)[0]
	es := h.st.Snapshot().Elements(tid)
	if len(es) != 3 || es[0].ArrayIndex != 1 || es[2].ArrayIndex != 3 || es[0].ArraySpan.Max != 10 {
		t.Fatalf("max_running 3 made %d rows (%+v)", len(es), es)
	}
	if es[0].Containers[0].KernelID == es[1].Containers[0].KernelID || es[0].SessionID == h.job(tid).SessionID {
		t.Fatal("elements share kernel ids")
	}
	// Place and run element 1: still 3 started-or-pending; end it: 4 gets a row.
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: es[0].ID, Nodes: []string{"n1"}}}}}})
	h.report("n1", es[0].ID, "main1", api.ContainerRunning, 0)
	if p := checkCounts(t, h.st, tid); p.State != api.JobRunning || len(h.st.Snapshot().Elements(tid)) != 3 {
		t.Fatalf("array is %s with %d rows, want RUNNING with 3", p.State, len(h.st.Snapshot().Elements(tid)))
	}
	h.report("n1", es[0].ID, "main1", api.ContainerExited, 0)
	if e := h.st.Snapshot().Element(tid, 4); e == nil || e.State != api.JobPending {
		t.Fatalf("element 4 after element 1 ended: %+v", e)
	}
	checkCounts(t, h.st, tid)

	// Kill one element by name, before its turn: it gets a row, CANCELLED,
	// and is skipped when its turn comes.
	nine := 9
	e := h.apply(Command{Act: Kill{Job: JobRef{ID: tid, Index: &nine}}}).(*Job)
	if e.ArrayIndex != 9 || e.State != api.JobCancelled {
		t.Fatalf("bkill 12[9] gave %+v", e)
	}
	checkCounts(t, h.st, tid)
	if _, err := h.st.Apply(h.idx+1, Command{Act: Kill{Job: JobRef{ID: tid, Index: &nine}}}); !errors.Is(err, ErrEnded) {
		t.Fatalf("killing 12[9] twice: %v", err)
	}
	h.idx++
	eleven := 11
	if _, err := h.st.Apply(h.idx+1, Command{Act: Kill{Job: JobRef{ID: tid, Index: &eleven}}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("killing an index the array lacks: %v", err)
	}
	h.idx++

	// Hold the whole array, then release it.
	p = h.apply(Command{Act: Hold{Job: JobRef{ID: tid}}}).(*Job)
	if !p.Array.Held || p.State != api.JobHeld {
		t.Fatalf("held array: %s %+v", p.State, p.Array)
	}
	checkCounts(t, h.st, tid)
	p = h.apply(Command{Act: Release{Job: JobRef{ID: tid}}}).(*Job)
	if p.Array.Held || p.State != api.JobPending {
		t.Fatalf("released array: %s %+v", p.State, p.Array)
	}
	checkCounts(t, h.st, tid)

	// Kill the whole array: every element ends, the array CANCELLED.
	p = h.apply(Command{Act: Kill{Job: JobRef{ID: tid}}}).(*Job)
	if p.State != api.JobCancelled || p.Array.States[api.JobCompleted] != 1 || p.Array.States[api.JobCancelled] != 9 {
		t.Fatalf("killed array: %s %v", p.State, p.Array.States)
	}
	checkCounts(t, h.st, tid)
}

func TestArrayAllDone(t *testing.T) {
	h := newHarness(t)
	id := h.apply(Command{Act: Submit{Jobs: []*Job{arrayJob("0,5", 0)}}}).([]uint64)[0]
	for _, e := range h.st.Snapshot().Elements(id) {
		h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: e.ID, Nodes: []string{"n1"}}}}}})
		h.report("n1", e.ID, "main1", api.ContainerExited, 0)
	}
	if p := checkCounts(t, h.st, id); p.State != api.JobCompleted || p.Ended.IsZero() {
		t.Fatalf("array with every element done: %s", p.State)
	}
}

// TestArrayDeterministic: two replicas applying the same commands hold
// the same state, element rows and their ids, kernel ids and networks
// included (nothing in array.go reads a clock or a random source).
func TestArrayDeterministic(t *testing.T) {
	dumps := make([]string, 2)
	for r := range dumps {
		h := newHarness(t)
		id := h.apply(Command{Act: Submit{Jobs: []*Job{arrayJob("1-500:3", 4)}}}).([]uint64)[0]
		es := h.st.Snapshot().Elements(id)
		h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: es[0].ID, Nodes: []string{"n1"}}}}}})
		h.report("n1", es[0].ID, "main1", api.ContainerRunning, 0)
		h.report("n1", es[0].ID, "main1", api.ContainerExited, 0)
		idx := 400
		h.apply(Command{Act: Hold{Job: JobRef{ID: id, Index: &idx}}})
		h.apply(Command{Act: Kill{Job: JobRef{ID: id}}})
		b, err := json.Marshal(h.st.Snapshot().Dump())
		if err != nil {
			t.Fatal(err)
		}
		dumps[r] = string(b)
	}
	if dumps[0] != dumps[1] {
		t.Fatal("two stores applying the same commands differ")
	}
}
