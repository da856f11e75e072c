package sched

import (
	"testing"
	"time"
)

// The scheduling loop's machine, stepped by hand: events, the clock and
// the passes' outcomes are the test's, so that each case says exactly
// when a pass happens. Nothing sleeps.

var loopT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testChargeEvery = time.Minute
	testRecheck     = 5 * time.Second
)

// leader is a machine that has taken office at loopT0 and made its first
// pass (which charged), with nothing to do after it.
func leader(t *testing.T) *loopMachine {
	t.Helper()
	m := newLoopMachine(testChargeEvery, testRecheck)
	m.Tick(loopT0)
	m.Step(loopLead)
	p := mustPass(t, m, "the first pass of a new leader")
	if !p.Charge || !p.Now.Equal(loopT0) {
		t.Fatalf("first pass %+v: want a charge at %s", p, loopT0)
	}
	m.Advance(loopOutcome{})
	return m
}

func mustPass(t *testing.T, m *loopMachine, why string) loopPass {
	t.Helper()
	p, ok := m.Ready()
	if !ok {
		t.Fatalf("%s: no pass at %s (machine %+v)", why, m.now.Sub(loopT0), *m)
	}
	return p
}

func noPass(t *testing.T, m *loopMachine, why string) {
	t.Helper()
	if p, ok := m.Ready(); ok {
		t.Fatalf("%s: a pass %+v at %s (machine %+v)", why, p, m.now.Sub(loopT0), *m)
	}
}

func TestLoopNoPassWhileFollowing(t *testing.T) {
	m := newLoopMachine(testChargeEvery, testRecheck)
	m.Tick(loopT0)
	for range 10 {
		m.Step(loopChange)
	}
	noPass(t, m, "a follower after changes")
	m.Tick(loopT0.Add(time.Hour)) // past every timer and charge
	noPass(t, m, "a follower an hour on")
	if d := m.Deadline(); !d.IsZero() {
		t.Fatalf("a follower's deadline is %s, want none", d)
	}
	m.Step(loopLead)
	if p := mustPass(t, m, "a new leader"); !p.Charge {
		t.Fatalf("a new leader's first pass %+v does not charge", p)
	}
	m.Step(loopFollow) // lost office while passing
	m.Advance(loopOutcome{Committed: true})
	m.Step(loopChange)
	m.Tick(loopT0.Add(2 * time.Hour))
	noPass(t, m, "after leadership was lost")
	m.Step(loopLead)
	mustPass(t, m, "leading again")
}

func TestLoopChangeMakesPass(t *testing.T) {
	m := leader(t)
	m.Tick(loopT0.Add(time.Second))
	noPass(t, m, "no event since the last pass")
	if d := m.Deadline(); !d.Equal(loopT0.Add(testRecheck)) {
		t.Fatalf("deadline %s, want the recheck at %s", d.Sub(loopT0), testRecheck)
	}
	m.Step(loopChange) // a submit woke the loop
	if d := m.Deadline(); !d.Equal(loopT0.Add(time.Second)) {
		t.Fatalf("deadline after a change %s, want now (1s)", d.Sub(loopT0))
	}
	p := mustPass(t, m, "a submit")
	if p.Charge || !p.Now.Equal(loopT0.Add(time.Second)) {
		t.Fatalf("pass %+v: want no charge, at 1s", p)
	}
	m.Advance(loopOutcome{})
	noPass(t, m, "after the submit's pass")
}

func TestLoopCoalescesEvents(t *testing.T) {
	m := leader(t)
	m.Tick(loopT0.Add(time.Second))
	for range 1000 { // a burst of submits and reports
		m.Step(loopChange)
	}
	mustPass(t, m, "a burst")
	noPass(t, m, "while the pass is made")
	for range 500 { // more come while the pass runs
		m.Step(loopChange)
	}
	noPass(t, m, "still passing")
	m.Advance(loopOutcome{})
	mustPass(t, m, "the changes that came during the pass")
	m.Advance(loopOutcome{})
	noPass(t, m, "both bursts seen")

	// A pass that committed (a plan) passes again at once, on the state
	// it made, with no event.
	m.Step(loopChange)
	mustPass(t, m, "a change")
	m.Advance(loopOutcome{Committed: true})
	mustPass(t, m, "after a commit")
	m.Advance(loopOutcome{})
	noPass(t, m, "after a pass with nothing to do")
}

func TestLoopTimerPasses(t *testing.T) {
	t.Run("walltime", func(t *testing.T) {
		m := leader(t)
		end := loopT0.Add(1500 * time.Millisecond) // a running job's walltime ends then
		m.Step(loopChange)
		mustPass(t, m, "a change")
		m.Advance(loopOutcome{NextLate: end})
		if d := m.Deadline(); !d.Equal(end) {
			t.Fatalf("deadline %s, want the walltime end %s", d.Sub(loopT0), end.Sub(loopT0))
		}
		m.Tick(end.Add(-time.Nanosecond))
		noPass(t, m, "a nanosecond before the walltime end")
		m.Tick(end)
		if p := mustPass(t, m, "at the walltime end"); !p.Now.Equal(end) {
			t.Fatalf("pass at %s, want %s", p.Now.Sub(loopT0), end.Sub(loopT0))
		}
		m.Advance(loopOutcome{Committed: true}) // the job timed out
		mustPass(t, m, "after the timeout's commit")
		m.Advance(loopOutcome{})
		if d := m.Deadline(); !d.Equal(end.Add(testRecheck)) {
			t.Fatalf("deadline %s, want the recheck %s", d.Sub(loopT0), end.Add(testRecheck).Sub(loopT0))
		}
	})
	t.Run("warning", func(t *testing.T) {
		// A warning signal due before the walltime end (and the
		// recheck) sets the timer; the walltime end comes after it.
		m := leader(t)
		warn, end := loopT0.Add(800*time.Millisecond), loopT0.Add(3*time.Second)
		m.Step(loopChange)
		mustPass(t, m, "a change")
		m.Advance(loopOutcome{NextLate: end, NextWarn: warn})
		if d := m.Deadline(); !d.Equal(warn) {
			t.Fatalf("deadline %s, want the warning %s", d.Sub(loopT0), warn.Sub(loopT0))
		}
		m.Tick(warn)
		mustPass(t, m, "at the warning")
		m.Advance(loopOutcome{Committed: true}) // the warning sent
		mustPass(t, m, "after the warning's commit")
		m.Advance(loopOutcome{NextLate: end})
		if d := m.Deadline(); !d.Equal(end) {
			t.Fatalf("deadline %s, want the walltime end %s", d.Sub(loopT0), end.Sub(loopT0))
		}
	})
	t.Run("walltime past", func(t *testing.T) {
		m := leader(t)
		m.Step(loopChange)
		mustPass(t, m, "a change")
		m.Advance(loopOutcome{NextLate: loopT0.Add(-time.Second)})
		if d := m.Deadline(); !d.Equal(loopT0.Add(lateFloor)) {
			t.Fatalf("deadline %s, want the floor %s", d.Sub(loopT0), lateFloor)
		}
	})
	t.Run("walltime after recheck", func(t *testing.T) {
		m := leader(t)
		m.Step(loopChange)
		mustPass(t, m, "a change")
		m.Advance(loopOutcome{NextLate: loopT0.Add(time.Hour)})
		if d := m.Deadline(); !d.Equal(loopT0.Add(testRecheck)) {
			t.Fatalf("deadline %s, want the recheck %s", d.Sub(loopT0), testRecheck)
		}
	})
	t.Run("node timeout recheck", func(t *testing.T) {
		m := leader(t)
		at := loopT0.Add(testRecheck)
		m.Tick(at.Add(-time.Nanosecond))
		noPass(t, m, "before the recheck")
		m.Tick(at)
		if p := mustPass(t, m, "at the recheck"); p.Charge {
			t.Fatalf("recheck pass %+v charges before ChargeEvery", p)
		}
		m.Advance(loopOutcome{Committed: true}) // a silent node marked DOWN
		mustPass(t, m, "after the node's commit")
	})
	t.Run("charge", func(t *testing.T) {
		m := leader(t)
		due := loopT0.Add(testChargeEvery)
		for at := loopT0.Add(testRecheck); at.Before(due); at = at.Add(testRecheck) {
			m.Tick(at)
			if p := mustPass(t, m, "a recheck"); p.Charge {
				t.Fatalf("pass at %s charges before ChargeEvery", at.Sub(loopT0))
			}
			m.Advance(loopOutcome{NextLate: due.Add(time.Hour)})
		}
		m.Tick(due.Add(-time.Nanosecond))
		noPass(t, m, "just before the charge")
		m.Tick(due)
		if p := mustPass(t, m, "charge due"); !p.Charge {
			t.Fatalf("pass %+v at ChargeEvery does not charge", p)
		}
	})
}

func TestLoopRetryAndHold(t *testing.T) {
	t.Run("failed commit", func(t *testing.T) {
		m := leader(t)
		m.Step(loopChange)
		mustPass(t, m, "a change")
		m.Advance(loopOutcome{Failed: true})
		for range 10 {
			m.Step(loopChange)
		}
		m.Tick(loopT0.Add(loopRetry - time.Nanosecond))
		noPass(t, m, "within the retry's wait")
		if d := m.Deadline(); !d.Equal(loopT0.Add(loopRetry)) {
			t.Fatalf("deadline %s, want the retry %s", d.Sub(loopT0), loopRetry)
		}
		m.Tick(loopT0.Add(loopRetry))
		mustPass(t, m, "the retry")
	})
	t.Run("placements held", func(t *testing.T) {
		m := leader(t)
		m.Step(loopChange)
		mustPass(t, m, "a change")
		until := loopT0.Add(2 * time.Second)
		m.Advance(loopOutcome{HeldUntil: until})
		m.Step(loopChange)
		m.Tick(until.Add(-time.Nanosecond))
		noPass(t, m, "while placements are held")
		m.Tick(until)
		mustPass(t, m, "at the hold's end")
		long := until.Add(time.Hour)
		m.Advance(loopOutcome{HeldUntil: long})
		if d := m.Deadline(); !d.Equal(until.Add(testRecheck)) {
			t.Fatalf("deadline in a long hold %s, want the recheck %s", d.Sub(loopT0), until.Add(testRecheck).Sub(loopT0))
		}
	})
}
