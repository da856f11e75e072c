package core

import (
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/reason"
)

// TestArraySlots: a pass starts no more elements of an array than its
// slots allow; the rest wait JobArrayTaskLimit and block nobody behind
// them (a job of another array and a plain job still start).
func TestArraySlots(t *testing.T) {
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	s := Snapshot{Nodes: []Node{node("a", 16, 64)}, ArraySlots: map[uint64]int{10: 2, 20: 0}}
	for id := uint64(11); id <= 15; id++ { // five elements of array 10
		j := gang(id, ModeSingleNode, 1, 1)
		j.Array, j.Submit = 10, now
		s.Queue = append(s.Queue, j)
	}
	blocked := gang(21, ModeSingleNode, 1, 1) // array 20 runs all it may
	blocked.Array, blocked.Submit = 20, now
	plain := gang(30, ModeSingleNode, 1, 1)
	plain.Submit = now
	unlimited := gang(41, ModeSingleNode, 1, 1) // array 40: no throttle
	unlimited.Array, unlimited.Submit = 40, now
	s.Queue = append(s.Queue, blocked, plain, unlimited)

	plan := Schedule(s, now)
	placed := map[uint64]bool{}
	for _, pl := range plan.Placements {
		placed[pl.JobID] = true
	}
	want := map[uint64]bool{11: true, 12: true, 30: true, 41: true}
	if len(placed) != len(want) {
		t.Fatalf("placed %v, want %v", placed, want)
	}
	for id := range want {
		if !placed[id] {
			t.Fatalf("placed %v, want %v", placed, want)
		}
	}
	reasons := map[uint64]string{}
	for _, r := range plan.Reasons {
		reasons[r.JobID] = r.Reason
	}
	for _, id := range []uint64{13, 14, 15, 21} {
		if reasons[id] != reason.ArrayTaskLimit {
			t.Errorf("job %d: reason %q, want %s", id, reasons[id], reason.ArrayTaskLimit)
		}
	}
	if s.ArraySlots[10] != 2 {
		t.Fatal("Schedule changed its snapshot's ArraySlots")
	}
}
