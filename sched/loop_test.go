package sched

import (
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/sched/core"
)

// The scheduling loop's machine, stepped by hand: events, the clock and
// the passes' outcomes are the test's, so that each case says exactly
// when a pass happens. Nothing sleeps.

var loopT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testChargeEvery = time.Minute
	testRecheck     = 5 * time.Second
	queuedDefer     = DefaultQueuedDefer
)

// leader is a machine that has taken office at loopT0 and made its first
// pass (which charged), with nothing to do after it.
func leader(t *testing.T) *loopMachine {
	t.Helper()
	m := newLoopMachine(testChargeEvery, testRecheck, queuedDefer)
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
	m := newLoopMachine(testChargeEvery, testRecheck, queuedDefer)
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

// TestLoopQueuedOnIdleCluster: a submit (a change to queued jobs alone)
// after a pass that did not find the cluster full makes its pass at
// once, as any change does: a lone job on an idle cluster starts
// without waiting.
func TestLoopQueuedOnIdleCluster(t *testing.T) {
	m := leader(t)
	m.Tick(loopT0.Add(time.Second))
	m.Step(loopQueued)
	if d := m.Deadline(); !d.Equal(loopT0.Add(time.Second)) {
		t.Fatalf("deadline after a submit %s, want now (1s)", d.Sub(loopT0))
	}
	mustPass(t, m, "a submit on an idle cluster")
	m.Advance(loopOutcome{Committed: true, Full: true}) // placed it: a commit is never full
	mustPass(t, m, "after the plan's commit")
	m.Advance(loopOutcome{})
	m.Step(loopQueued)
	mustPass(t, m, "the next submit")
}

// TestLoopQueuedBehindFullCluster: after a pass that found the cluster
// full, the submits that come one at a time make no pass of their own:
// the next change that may free room (a job's end) makes one pass for
// all of them, or, when none comes, queuedDefer after the first.
func TestLoopQueuedBehindFullCluster(t *testing.T) {
	m := leader(t)
	at := loopT0.Add(time.Second)
	m.Tick(at)
	m.Step(loopChange)
	mustPass(t, m, "a change")
	m.Advance(loopOutcome{Full: true})
	for i := range 5 { // five submits 10 ms apart
		m.Tick(at.Add(time.Duration(i) * 10 * time.Millisecond))
		m.Step(loopQueued)
		noPass(t, m, "a submit behind a full cluster")
	}
	if d := m.Deadline(); !d.Equal(at.Add(queuedDefer)) {
		t.Fatalf("deadline %s, want the first submit's %s later", d.Sub(at), queuedDefer)
	}
	m.Step(loopChange) // a job ended
	if p := mustPass(t, m, "a job's end after the submits"); !p.Now.Equal(at.Add(40 * time.Millisecond)) {
		t.Fatalf("pass at %s, want at the end (40ms)", p.Now.Sub(at))
	}
	m.Advance(loopOutcome{Committed: true}) // the freed room taken
	mustPass(t, m, "after the commit")
	m.Advance(loopOutcome{Full: true})
	noPass(t, m, "the submits all seen")

	// With no change that frees room, the submits wait queuedDefer.
	at = at.Add(time.Second)
	m.Tick(at)
	m.Step(loopQueued)
	m.Tick(at.Add(queuedDefer - time.Nanosecond))
	m.Step(loopQueued)
	noPass(t, m, "before queuedDefer")
	m.Tick(at.Add(queuedDefer))
	if p := mustPass(t, m, "queuedDefer after a submit"); !p.Now.Equal(at.Add(queuedDefer)) {
		t.Fatalf("pass at %s, want %s", p.Now.Sub(at), queuedDefer)
	}
	m.Advance(loopOutcome{Full: true})
	noPass(t, m, "both submits seen")

	// A submit while a pass runs: put off when that pass finds the
	// cluster full, made at once when it does not.
	m.Step(loopChange)
	mustPass(t, m, "a change")
	m.Step(loopQueued)
	m.Advance(loopOutcome{Full: true})
	noPass(t, m, "a submit during a pass that found the cluster full")
	if d := m.Deadline(); !d.Equal(m.now.Add(queuedDefer)) {
		t.Fatalf("deadline %s after the pass, want %s", d.Sub(m.now), queuedDefer)
	}
	m.Step(loopChange)
	mustPass(t, m, "a change")
	m.Step(loopQueued)
	m.Advance(loopOutcome{})
	mustPass(t, m, "a submit during a pass that left room")
	m.Advance(loopOutcome{})

	// A pass that failed, or held placements, does not count as full.
	m.Step(loopChange)
	mustPass(t, m, "a change")
	m.Advance(loopOutcome{Full: true, HeldUntil: m.now.Add(time.Minute)})
	m.Tick(m.now.Add(testRecheck))
	mustPass(t, m, "the recheck while held")
	m.Advance(loopOutcome{})
	m.Step(loopQueued)
	mustPass(t, m, "a submit after a pass that left room")
}

// TestRoomless: the cluster is full when no node has the CPU free for
// the smallest container its queued jobs ask for (held ones aside), and
// not while any node has, nor with no job waiting.
func TestRoomless(t *testing.T) {
	cpu := func(milli int64) core.Res { return core.Res{CPUMilli: milli, Memory: 1 << 30} }
	job := func(held bool, cs ...int64) core.Job {
		j := core.Job{Held: held}
		for _, c := range cs {
			j.Containers = append(j.Containers, cpu(c))
		}
		return j
	}
	node := func(free int64) core.Node { return core.Node{Capacity: cpu(2000), Free: cpu(free)} }
	for _, c := range []struct {
		name  string
		nodes []core.Node
		queue []core.Job
		want  bool
	}{
		{"no job waits", []core.Node{node(0)}, nil, false},
		{"only held jobs wait", []core.Node{node(0)}, []core.Job{job(true, 1000)}, false},
		{"every cpu taken", []core.Node{node(0), node(0)}, []core.Job{job(false, 1000)}, true},
		{"less free than the smallest container", []core.Node{node(500), node(999)}, []core.Job{job(false, 2000, 1000), job(false, 1500)}, true},
		{"a node with room for the smallest", []core.Node{node(0), node(1000)}, []core.Job{job(false, 2000, 1000)}, false},
		{"room for a held job's smaller container only", []core.Node{node(500)}, []core.Job{job(true, 500), job(false, 1000)}, true},
		{"a container asking no cpu", []core.Node{node(0)}, []core.Job{job(false, 0)}, false},
	} {
		if got := roomless(core.Snapshot{Nodes: c.nodes, Queue: c.queue}); got != c.want {
			t.Errorf("%s: roomless %v, want %v", c.name, got, c.want)
		}
	}
}
