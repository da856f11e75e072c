package state

import (
	"errors"
	"testing"
)

func TestDrainCommand(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: DrainNodes{Drain: &Drain{Nodes: []string{"n1"}, Reason: "fan", By: "root"}}})
	n := h.st.Snapshot().Node("n1")
	if !n.Drain || n.Reason != "fan" || n.DrainedBy != "root" || !n.DrainedAt.Equal(t0.Add(2e9)) {
		t.Fatalf("drained n1: %+v", n)
	}
	// The nodelet registers again (a restart): the drain stays.
	h.apply(Command{Act: Register{Node: &Node{Name: "n1", Addr: "10.0.0.9", Capacity: Resources{CPUMilli: 8000, Memory: 8 << 30}}}})
	if n := h.st.Snapshot().Node("n1"); !n.Drain || n.Reason != "fan" || n.Addr != "10.0.0.9" {
		t.Fatalf("re-registered n1: %+v", n)
	}
	// So does a snapshot's round trip (raft snapshots, badmin snapshot).
	st := New()
	if err := st.Restore(h.st.Snapshot().Dump()); err != nil {
		t.Fatal(err)
	}
	if n := st.Snapshot().Node("n1"); !n.Drain || n.Reason != "fan" {
		t.Fatalf("restored n1: %+v", n)
	}
	// An unknown node refuses the whole command.
	h.idx++
	if _, err := h.st.Apply(h.idx, Command{Act: DrainNodes{Drain: &Drain{Nodes: []string{"n1", "n7"}, Resume: true}}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("resume of an unknown node: %v", err)
	}
	if !h.st.Snapshot().Node("n1").Drain {
		t.Fatal("a refused resume resumed n1")
	}
	h.apply(Command{Act: DrainNodes{Drain: &Drain{Nodes: []string{"n1"}, Resume: true}}})
	if n := h.st.Snapshot().Node("n1"); n.Drain || n.Reason != "" || n.DrainedBy != "" || !n.DrainedAt.IsZero() {
		t.Fatalf("resumed n1: %+v", n)
	}
}

// A dependency on a job the log does not hold (yet) is refused at apply.
func TestSubmitDependencyChecked(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	j := session(1)
	j.DependsOn = &Dependency{Conditions: []Condition{{Kind: "done", JobID: 2}}}
	h.idx++
	if _, err := h.st.Apply(h.idx, Command{Act: Submit{Jobs: []*Job{j}}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dependency on the job itself: %v", err)
	}
	j.DependsOn.Conditions[0].JobID = 1
	if id := h.apply(Command{Act: Submit{Jobs: []*Job{j}}}).([]uint64)[0]; id != 2 || h.job(2).DependsOn.Conditions[0].String() != "done(1)" {
		t.Fatalf("job %v: %+v", id, h.job(2).DependsOn)
	}
}
