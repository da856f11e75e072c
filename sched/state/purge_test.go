package state

import (
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestPurge: a purge drops the named ended runs only (a live job, a
// requeued run and an unknown id are left), and job ids keep climbing
// past purged ones, through a snapshot and restore too.
func TestPurge(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	}
	h.apply(Command{Act: Kill{Job: JobRef{ID: 1}}})
	h.apply(Command{Act: Kill{Job: JobRef{ID: 3}}})
	h.apply(Command{Act: Purge{Keys: []PurgeKey{{JobID: 1}, {JobID: 2}, {JobID: 3, Run: 1}, {JobID: 99}}}})
	if h.job(1) != nil {
		t.Fatal("ended job 1 still in the state after its purge")
	}
	if h.job(2) == nil || h.job(3) == nil {
		t.Fatal("purge dropped a live job or another run of an ended one")
	}
	h.apply(Command{Act: Purge{Keys: []PurgeKey{{JobID: 3}}}})
	if h.job(3) != nil {
		t.Fatal("job 3 survived its purge")
	}
	if got := h.st.Snapshot().LastJobID(); got != 3 {
		t.Fatalf("LastJobID %d after purging the last job, want 3", got)
	}
	re := New()
	if err := re.Restore(h.st.Snapshot().Dump()); err != nil {
		t.Fatal(err)
	}
	h.st = re
	id := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	if id != 4 {
		t.Fatalf("the next job after purging 3 got id %d, want 4 (ids are never reused)", id)
	}
	if _, err := h.st.Apply(h.idx+1, Command{Act: Purge{}}); err == nil {
		t.Fatal("an empty purge applied")
	}
	if got := len(h.st.Snapshot().Jobs()); got != 2 || h.job(2).State != api.JobPending {
		t.Fatalf("%d jobs left, want 2 and 4", got)
	}
}
