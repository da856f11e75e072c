package state

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestRequestAppliedOnce: a hold, release, kill or signal sent again with
// the request id of one already applied (the client re-sends after a
// leader lost office mid-commit, or after a cut connection) answers as
// the first did and changes nothing, where it used to fail on its own
// effect ("job 1 is already held", "already ended").
func TestRequestAppliedOnce(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Kind: CmdSubmit, Submit: session(1)})
	h.apply(Command{Kind: CmdSubmit, Submit: session(1)})

	twice := func(c Command) (*Job, *Job) {
		t.Helper()
		first := h.apply(c).(*Job)
		before := h.job(first.ID).ModifyIndex
		again := h.apply(c).(*Job) // fails the test on an error
		if h.job(first.ID).ModifyIndex != before {
			t.Fatalf("repeated %s %s changed job %d", c.Kind, c.Request, first.ID)
		}
		return first, again
	}
	for _, c := range []Command{
		{Kind: CmdHold, Hold: 1, Request: "r-hold"},
		{Kind: CmdRelease, Release: 1, Request: "r-release"},
		{Kind: CmdKill, Kill: 1, Request: "r-kill"},
	} {
		first, again := twice(c)
		if again.State != first.State || again.ModifyIndex != first.ModifyIndex {
			t.Errorf("repeated %s answered %s@%d, want the first answer %s@%d", c.Kind, again.State, again.ModifyIndex, first.State, first.ModifyIndex)
		}
	}
	if h.job(1).State != api.JobCancelled {
		t.Fatalf("job 1 is %s, want CANCELLED", h.job(1).State)
	}

	// A signal to a running job is recorded once.
	h.apply(Command{Kind: CmdPlan, Plan: &Plan{Placements: []Placement{{JobID: 2, Nodes: []string{"n1"}}}}})
	h.report("n1", 2, "main1", api.ContainerRunning, 0)
	twice(Command{Kind: CmdSignal, Signal: &Signal{JobID: 2, Signal: int(syscall.SIGUSR1)}, Request: "r-sig"})
	if n := len(h.job(2).Signals); n != 1 {
		t.Fatalf("job 2 has %d signal requests, want 1", n)
	}

	// The same id for another command is refused, not answered.
	h.idx++
	if _, err := h.st.Apply(h.idx, Command{Kind: CmdKill, Kill: 2, Request: "r-hold", Time: t0.Add(time.Hour)}); !errors.Is(err, ErrConflict) {
		t.Fatalf("request id reused for another command: %v, want a conflict", err)
	}
	// Without an id nothing is remembered: the old refusal stands.
	h.idx++
	if _, err := h.st.Apply(h.idx, Command{Kind: CmdKill, Kill: 1}); !errors.Is(err, ErrEnded) {
		t.Fatalf("kill of an ended job without a request id: %v, want ErrEnded", err)
	}

	// The answers travel in snapshots, so a peer that installs one
	// answers repeats the same.
	st := New()
	if err := st.Restore(h.st.Snapshot().Dump()); err != nil {
		t.Fatal(err)
	}
	if n := st.Snapshot().Requests(); n != 4 {
		t.Fatalf("restored %d request answers, want 4", n)
	}
}

// TestRequestAnswersForgotten: answers are kept RequestTTL by the
// commands' own clock, so the table stays bounded and every replica
// forgets the same ones.
func TestRequestAnswersForgotten(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		h.apply(Command{Kind: CmdSubmit, Submit: session(1)})
	}
	at := func(c Command, d time.Duration) {
		t.Helper()
		h.idx++
		c.Time = t0.Add(d)
		if _, err := h.st.Apply(h.idx, c); err != nil {
			t.Fatal(err)
		}
	}
	at(Command{Kind: CmdHold, Hold: 1, Request: "a"}, 0)
	at(Command{Kind: CmdHold, Hold: 2, Request: "b"}, time.Minute)
	at(Command{Kind: CmdHold, Hold: 3, Request: "c"}, RequestTTL+30*time.Second)
	if n := h.st.Snapshot().Requests(); n != 2 {
		t.Fatalf("%d answers kept, want 2 (the first is past RequestTTL)", n)
	}
}
