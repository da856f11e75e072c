package state

import (
	"slices"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestSubmitBatch: a CmdBatch stores its jobs with consecutive ids in
// order, a job whose request id made a job already gets that job's id,
// and a job that fails leaves none of the batch stored.
func TestSubmitBatch(t *testing.T) {
	h := newHarness(t)
	one := session(1)
	one.RequestID = "a/1"
	first := h.apply(Command{Act: Submit{Jobs: []*Job{one}}}).([]uint64)[0]

	two, three := session(2), session(1)
	two.RequestID, three.RequestID = "b/1", "b/2"
	ids := h.apply(Command{Act: Submit{Jobs: []*Job{two, three}}}).([]uint64)
	if !slices.Equal(ids, []uint64{first + 1, first + 2}) {
		t.Fatalf("ids %v, want %d and %d", ids, first+1, first+2)
	}
	if j := h.job(ids[0]); j == nil || len(j.Containers) != 2 || j.State != api.JobPending {
		t.Fatalf("first of the batch: %+v", j)
	}

	// A retry of the batch, and a batch naming the earlier single
	// submit's request: the same jobs, none new.
	again := h.apply(Command{Act: Submit{Jobs: []*Job{two, three}}}).([]uint64)
	mixed := h.apply(Command{Act: Submit{Jobs: []*Job{one, session(1)}}}).([]uint64)
	if !slices.Equal(again, ids) || mixed[0] != first || mixed[1] != first+3 {
		t.Fatalf("retry %v (want %v), mixed %v (want %d, %d)", again, ids, mixed, first, first+3)
	}

	before := len(h.st.Snapshot().Jobs())
	bad := session(1)
	bad.DependsOn = &Dependency{Conditions: []Condition{{Kind: "done", JobID: 999}}}
	h.idx++
	if _, err := h.st.Apply(h.idx, Command{Time: t0, Act: Submit{Jobs: []*Job{session(1), bad}}}); err == nil || !strings.Contains(err.Error(), "job 2 of the batch") {
		t.Fatalf("a batch with a bad second job: %v", err)
	}
	if _, err := h.st.Apply(h.idx, Command{Act: Submit{}, Time: t0}); err == nil {
		t.Fatal("an empty batch was applied")
	}
	if n := len(h.st.Snapshot().Jobs()); n != before {
		t.Fatalf("%d jobs after failed batches, want %d", n, before)
	}
}

// TestSubmitEach: a CmdSubmits entry (single submits the leader commits
// together) stores each job as if it came alone: consecutive ids in
// order, a retried request gets its first job, and a refused job leaves
// the others stored.
func TestSubmitEach(t *testing.T) {
	h := newHarness(t)
	one := session(1)
	one.RequestID = "a"
	first := h.apply(Command{Act: Submit{Jobs: []*Job{one}}}).([]uint64)[0]

	bad := session(1)
	bad.DependsOn = &Dependency{Conditions: []Condition{{Kind: "done", JobID: 999}}}
	two, retry := session(2), session(1)
	retry.RequestID = "a"
	out := h.apply(Command{Act: Submit{Jobs: []*Job{two, bad, retry, session(1)}, Each: true}}).([]Submitted)
	if len(out) != 4 {
		t.Fatalf("%d outcomes for 4 jobs", len(out))
	}
	if out[0].Err != nil || out[0].ID != first+1 {
		t.Errorf("first job: %+v, want id %d", out[0], first+1)
	}
	if out[1].Err == nil || out[1].ID != 0 {
		t.Errorf("the job on a missing job was stored: %+v", out[1])
	}
	if out[2].Err != nil || out[2].ID != first {
		t.Errorf("retried request: %+v, want its first job %d", out[2], first)
	}
	if out[3].Err != nil || out[3].ID != first+2 {
		t.Errorf("last job: %+v, want id %d (the refused one takes no id)", out[3], first+2)
	}
	if j := h.job(first + 1); j == nil || len(j.Containers) != 2 || j.State != api.JobPending {
		t.Fatalf("first of the entry: %+v", j)
	}
	if n := len(h.st.Snapshot().Jobs()); n != 3 {
		t.Errorf("%d jobs stored, want 3", n)
	}
	h.idx++
	if _, err := h.st.Apply(h.idx, Command{Act: Submit{Each: true}, Time: t0}); err == nil {
		t.Fatal("an empty submits entry was applied")
	}
}
