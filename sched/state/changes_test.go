package state

import (
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestSnapshotChanges: the feed's first read asks for the whole state;
// then each read answers the jobs' changes since the one before, in
// commit order, each with the row before and after, and only what its
// snapshot holds; a restore, or the reader stopping, asks for the whole
// state again.
func TestSnapshotChanges(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	if _, changes, whole := h.st.SnapshotChanges(); !whole || changes != nil {
		t.Fatalf("first read: %d changes, whole %v; want the whole state", len(changes), whole)
	}
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Hold{Job: JobRef{ID: 1}}})
	h.apply(Command{Act: Kill{Job: JobRef{ID: 2}}})
	v, changes, whole := h.st.SnapshotChanges()
	if whole || len(changes) != 3 {
		t.Fatalf("%d changes (whole %v), want 3", len(changes), whole)
	}
	if c := changes[0]; c.Before != nil || c.After == nil || c.After.ID != 2 {
		t.Errorf("first change %+v, want job 2 submitted", c)
	}
	if c := changes[1]; c.Before == nil || c.Before.State != api.JobPending || c.After.State != api.JobHeld {
		t.Errorf("second change %+v, want job 1 from PENDING to HELD", c)
	}
	if c := changes[2]; c.After.ID != 2 || !c.After.State.Terminal() {
		t.Errorf("third change %+v, want job 2 ended", c)
	}
	if v.Job(2) != changes[2].After {
		t.Error("the snapshot does not hold the row the last change left")
	}
	if _, changes, whole := h.st.SnapshotChanges(); whole || len(changes) != 0 {
		t.Fatalf("read again with nothing changed: %d changes, whole %v", len(changes), whole)
	}
	h.apply(Command{Act: Charge{}}) // no job changes
	if _, changes, _ := h.st.SnapshotChanges(); len(changes) != 0 {
		t.Fatalf("a charge gave %d job changes, want none", len(changes))
	}
	if err := h.st.Restore(h.st.Snapshot().Dump()); err != nil {
		t.Fatal(err)
	}
	h.apply(Command{Act: Release{Job: JobRef{ID: 1}}})
	if _, changes, whole := h.st.SnapshotChanges(); !whole || changes != nil {
		t.Fatalf("after a restore: %d changes, whole %v; want the whole state", len(changes), whole)
	}
	h.st.StopChanges()
	h.apply(Command{Act: Hold{Job: JobRef{ID: 1}}})
	if _, changes, whole := h.st.SnapshotChanges(); !whole || changes != nil {
		t.Fatalf("after StopChanges: %d changes, whole %v; want the whole state", len(changes), whole)
	}
}
