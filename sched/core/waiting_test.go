package core

import (
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/depend"
	"github.com/troupe-hpc/troupe/internal/reason"
)

// reason.Waiting gives the reason the stages would, in their order, and a pass
// over a job that was given it agrees where the snapshot says no more
// than the act knew.
func TestWaitingAgreesWithThePass(t *testing.T) {
	for _, tt := range []struct {
		held, dependent, throttled bool
		want                       string
	}{
		{false, false, false, reason.Priority},
		{true, true, true, reason.Held},
		{false, true, true, reason.Dependency},
		{false, false, true, reason.ArrayTaskLimit},
	} {
		if got := reason.Waiting(tt.held, tt.dependent, tt.throttled); got != tt.want {
			t.Errorf("reason.Waiting(%v, %v, %v) = %q, want %q", tt.held, tt.dependent, tt.throttled, got, tt.want)
		}
	}

	// No node: every job waits; the pass says why, and where the act
	// knew as much it had said the same.
	now := time.Unix(1e6, 0)
	waitingOn := JobRef{ID: 99}
	s := &Snapshot{
		Queue: []Job{
			{ID: 1, Held: true, Reason: reason.Waiting(true, false, false)},
			{ID: 2, Depends: &Dependency{Conditions: []Condition{{Kind: depend.Done, Job: waitingOn}}}, Reason: reason.Waiting(false, true, false)},
			{ID: 3, Array: 7, Reason: reason.Waiting(false, false, true)},
		},
		ArraySlots: map[uint64]int{7: 0},
		Named:      map[JobRef]JobStatus{waitingOn: {}},
	}
	for i := range s.Queue {
		s.Queue[i].Submit, s.Queue[i].Walltime, s.Queue[i].User = now, time.Hour, "u"
		s.Queue[i].Containers = []Res{{CPUMilli: 1000, Memory: 1 << 20}}
	}
	plan := Schedule(*s, now)
	if len(plan.Reasons) != 0 {
		t.Errorf("the pass changed reasons the acts gave: %+v", plan.Reasons)
	}
}
