package sched

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/state"
)

// The leader's scheduling loop: on every state change (a submit, a
// report, a node's change, a kill: each wakes it), on the walltime of the
// next job to end, every ChargeEvery and at least every recheck, it makes
// a pass: it charges running jobs' usage when due (a raft command, so
// every replica charges the same), marks silent nodes DOWN, ends the jobs
// past their walltime, hands a snapshot and the time to the pure core and
// commits the plan it returns.
//
// When it passes is decided by loopMachine, a state machine that does no
// I/O and reads no clock: it is fed events (Step) and the time (Tick),
// says when a pass is due (Ready) and when it next will be without an
// event (Deadline), and is told how the pass went (Advance). schedule is
// its driver: it feeds it the wake-ups, the state's watch and the
// configured clock, and makes the passes it asks for (pass).
//
//	             Step(loopLead)
//	  follower ────────────────► waiting ◄─────────────────────────┐
//	     ▲                          │                              │
//	     │ Step(loopFollow),        │ Ready, when due: a change    │ Advance:
//	     │ from any state           │ (Step), or the timer or the  │  committed: due at once
//	     │                          │ next charge reached (Tick);  │  failed: due after loopRetry
//	     │                          │ never before notBefore       │  held: due at the hold's end
//	     │                          ▼                              │  else: timer at the next
//	     └──────────────────────  passing ─────────────────────────┘   walltime end or recheck
//
// A change that comes while a pass is made is kept for the next pass;
// any number of changes between two passes make one pass.
//
// A change to queued jobs alone (a submit, a hold or release: nothing a
// node runs or offers changed) after a pass that found the cluster full
// (it placed nothing, jobs wait, and no node has the CPU free for the
// smallest of their containers) is put off, by at most Config.QueuedDefer,
// until the next change that may free room (a job ending, a node) or the
// timer: the jobs that arrive one request at a time behind a backlog
// then share that pass instead of each making its own, which would plan
// the whole backlog to place nothing. With room free, or no job waiting
// (an idle cluster), a submit's pass is made at once.

// idlePass bounds how long the loop waits without a state change.
const idlePass = 5 * time.Second

// loopRetry is how long the loop waits after a pass whose commit failed
// (raft refused or timed out) before it passes again.
const loopRetry = 100 * time.Millisecond

// DefaultQueuedDefer bounds how long a change to queued jobs alone waits
// for a pass behind a full cluster (Config.QueuedDefer): a new job that
// could start at once (it fits in room the backlog's jobs do not, or
// preempts) starts within it.
const DefaultQueuedDefer = 100 * time.Millisecond

// lateFloor is the least the loop waits for a deadline: a walltime end
// closer than that (or past) is waited for that long, so that a clock
// that does not move (tests hold theirs) never makes the loop spin.
const lateFloor = 10 * time.Millisecond

// loopEvent is what the driver steps the machine with.
type loopEvent int

const (
	// loopChange: the state changed, or something asked for a pass
	// (submits, reports, node and drain changes, kills, a restore all
	// wake the loop).
	loopChange loopEvent = iota
	// loopLead: this server took office as leader; the first pass
	// charges usage.
	loopLead
	// loopFollow: this server no longer leads; no pass until loopLead.
	loopFollow
	// loopQueued: the state changed in queued jobs alone (a submit, a
	// hold or release, a pending job killed): nothing that running jobs
	// hold or nodes offer did.
	loopQueued
)

// loopPass is a pass the machine asks for.
type loopPass struct {
	Now    time.Time // the pass's time: the core plans at it, lateness and silence are judged at it
	Charge bool      // charge running jobs' usage first
}

// loopOutcome is how a pass went, for Advance.
type loopOutcome struct {
	// Committed: the pass changed the state (nodes marked DOWN, jobs
	// timed out, a plan): pass again at once, on the new state.
	Committed bool
	// Failed: a commit failed; pass again after loopRetry.
	Failed bool
	// HeldUntil: placements are held until then (a restore into an
	// empty state); pass again then, or at the recheck if sooner.
	HeldUntil time.Time
	// NextLate is when the next running job reaches its walltime, or
	// a reservation's window opens or closes, whichever comes first
	// (zero: neither): the timer is set to it when sooner than the
	// recheck.
	NextLate time.Time
	// NextWarn is when the next running job's warning signal is due
	// (zero: none): the timer is set to it as to NextLate.
	NextWarn time.Time
	// Full: the pass placed nothing, jobs wait (held ones aside) and no
	// node has the CPU free for the smallest of their containers
	// (roomless): a change to queued jobs alone is put off, by at most
	// Config.QueuedDefer, until a change that may free room.
	Full bool
}

// loopMachine decides when the scheduling loop passes and whether the
// pass charges usage. It is not safe for concurrent use: one driver
// steps it.
type loopMachine struct {
	chargeEvery time.Duration
	// queuedDefer: how long a loopQueued after a full pass may wait
	// (not positive: none, it is a loopChange).
	queuedDefer time.Duration
	// recheck is the longest the loop goes without a pass while it
	// leads: silent nodes are found within the node timeout plus it.
	recheck time.Duration

	leading bool
	passing bool      // Ready answered a pass that Advance has not closed
	now     time.Time // the last Tick
	changed bool      // a loopChange (or a committed pass) since the last pass began
	// timer: a pass falls due then without any event (zero: none set).
	timer time.Time
	// notBefore: no pass before it (a failed commit's retry, a hold).
	notBefore time.Time
	// charged is when the last charging pass began (zero: the next
	// pass charges).
	charged time.Time
	// full: the last pass found the cluster full (loopOutcome.Full).
	full bool
	// queued: a loopQueued came while passing; Advance decides.
	queued bool
	// deferred: a loopQueued put off falls due then (zero: none).
	deferred time.Time
}

// newLoopMachine is a follower's machine: no pass until Step(loopLead).
func newLoopMachine(chargeEvery, recheck, queuedDefer time.Duration) *loopMachine {
	return &loopMachine{chargeEvery: chargeEvery, recheck: recheck, queuedDefer: queuedDefer}
}

// Tick tells the machine the time.
func (m *loopMachine) Tick(now time.Time) { m.now = now }

// Step feeds the machine an event.
func (m *loopMachine) Step(ev loopEvent) {
	switch ev {
	case loopChange:
		m.changed = true
	case loopQueued:
		switch {
		case m.queuedDefer <= 0:
			m.changed = true
		case m.passing:
			m.queued = true
		case m.full:
			if m.deferred.IsZero() {
				m.deferred = m.now.Add(m.queuedDefer)
			}
		default:
			m.changed = true
		}
	case loopLead:
		*m = loopMachine{chargeEvery: m.chargeEvery, recheck: m.recheck, queuedDefer: m.queuedDefer, now: m.now, leading: true, changed: true}
	case loopFollow:
		*m = loopMachine{chargeEvery: m.chargeEvery, recheck: m.recheck, queuedDefer: m.queuedDefer, now: m.now}
	}
}

// Ready answers the pass due at the last Tick, if one is: while leading,
// not passing and not before notBefore, after a change, at the timer, at
// a put-off change to queued jobs, or when usage is due for a charge.
// The machine is then passing until Advance.
func (m *loopMachine) Ready() (loopPass, bool) {
	if !m.leading || m.passing || m.now.Before(m.notBefore) {
		return loopPass{}, false
	}
	charge := m.now.Sub(m.charged) >= m.chargeEvery
	timer := !m.timer.IsZero() && !m.now.Before(m.timer)
	deferred := !m.deferred.IsZero() && !m.now.Before(m.deferred)
	if !m.changed && !timer && !charge && !deferred {
		return loopPass{}, false
	}
	m.passing, m.changed, m.timer, m.deferred, m.queued = true, false, time.Time{}, time.Time{}, false
	if charge {
		m.charged = m.now
	}
	return loopPass{Now: m.now, Charge: charge}, true
}

// Advance closes the pass Ready answered with its outcome o, at the last
// Tick: the next pass is due at once after a commit, after loopRetry
// after a failure, at the hold's end (or the recheck) while placements
// are held, else at the next walltime end, the next warning signal due
// or the recheck, whichever comes first, or at the next change (a
// change to queued jobs alone, after a pass that found the cluster full,
// at most Config.QueuedDefer later).
func (m *loopMachine) Advance(o loopOutcome) {
	if !m.passing {
		return // a pass of an earlier term: a loopLead or loopFollow came between
	}
	m.passing = false
	m.full = o.Full && !o.Committed && !o.Failed && !m.now.Before(o.HeldUntil)
	if m.queued {
		m.queued = false
		if m.full {
			m.deferred = m.now.Add(m.queuedDefer)
		} else {
			m.changed = true
		}
	}
	switch {
	case o.Failed:
		m.notBefore, m.changed = m.now.Add(loopRetry), true
	case o.Committed:
		m.changed = true
	case m.now.Before(o.HeldUntil):
		m.notBefore, m.changed = minTime(o.HeldUntil, m.now.Add(m.recheck)), true
	default:
		m.timer = m.now.Add(m.recheck)
		for _, at := range []time.Time{o.NextLate, o.NextWarn} {
			if !at.IsZero() && at.Before(m.timer) {
				m.timer = maxTime(at, m.now.Add(lateFloor))
			}
		}
	}
}

// Deadline is when a pass falls due without another event (zero: none
// will while following or passing). When it has come, Ready answers the
// pass at the Tick of that time.
func (m *loopMachine) Deadline() time.Time {
	if !m.leading || m.passing {
		return time.Time{}
	}
	due := m.charged.Add(m.chargeEvery)
	if !m.timer.IsZero() {
		due = minTime(due, m.timer)
	}
	if !m.deferred.IsZero() {
		due = minTime(due, m.deferred)
	}
	if m.changed {
		due = minTime(due, m.now)
	}
	return maxTime(due, m.notBefore)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// schedule drives the loop until ctx ends (the end of this server's term
// as leader): it steps the machine with the wake-ups (wake) and the
// state's changes, ticks it with the configured clock, and makes the
// passes it asks for.
func (s *scheduler) schedule(ctx context.Context) {
	defer s.st.StopChanges() // the backlog (backlog.go) reads them while this server leads
	m := newLoopMachine(s.cfg.ChargeEvery, min(idlePass, s.cfg.NodeTimeout/4), s.cfg.QueuedDefer)
	m.Tick(s.cfg.Clock())
	m.Step(loopLead)
	v := s.st.Snapshot()
	_, ws := v.Index()    // changes the last pass has not seen
	room := v.RoomMarks() // what running jobs hold and nodes offer, as the last pass or wake-up saw it
	for ctx.Err() == nil {
		m.Tick(s.cfg.Clock())
		if p, ok := m.Ready(); ok {
			var o loopOutcome
			o, ws, room = s.pass(ctx, p)
			m.Tick(s.cfg.Clock())
			m.Advance(o)
			continue
		}
		wait := m.recheck
		if d := m.Deadline(); !d.IsZero() {
			wait = min(max(d.Sub(s.cfg.Clock()), lateFloor), wait)
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		woken := false
		select {
		case <-s.kick: // after a change (submits, reports, kills… kick as they commit)
			woken = true
		case <-watch(wctx, ws):
			woken = wctx.Err() == nil // the state changed
		}
		cancel()
		if woken { // step the machine with what changed; watch what comes next
			v := s.st.Snapshot()
			_, ws = v.Index()
			now := v.RoomMarks()
			if state.SameRoom(room, now) {
				m.Step(loopQueued)
			} else {
				m.Step(loopChange)
			}
			room = now
		}
	}
}

// pass makes the pass p: it charges usage when p says, then does the
// first of these that has work, on the state as it is: mark the silent
// nodes DOWN, end the jobs past their walltime, send the warning
// signals due, resume the suspended jobs that fit again (suspend.go),
// (nothing more while placements are held), plan and commit placements. It answers how it
// went, the watch set of the state it worked on and that state's marks
// of what placed jobs hold and nodes offer (state.Snapshot.RoomMarks).
func (s *scheduler) pass(ctx context.Context, p loopPass) (loopOutcome, memdb.WatchSet, []<-chan struct{}) {
	o, v := s.passOn(ctx, p)
	_, ws := v.Index()
	return o, ws, v.RoomMarks()
}

// passOn is pass's work, and the snapshot it worked on.
func (s *scheduler) passOn(ctx context.Context, p loopPass) (loopOutcome, *state.Snapshot) {
	if p.Charge {
		if err := s.ChargeUsage(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("charging usage", "err", err)
		}
	}
	// The backlog follows every change, whatever this pass then does.
	v, changes, whole := s.st.SnapshotChanges()
	s.backlog.update(v, changes, whole)
	now := p.Now
	if silent := s.fleet.silentNodes(v, now); len(silent) > 0 {
		if err := s.fleet.failNodes(ctx, v, silent); err != nil {
			if ctx.Err() == nil {
				s.log.Error("marking silent nodes down", "err", err)
			}
			return loopOutcome{Failed: true}, v
		}
		return loopOutcome{Committed: true}, v
	}
	late, nextLate := v.Late(now)
	if len(late) > 0 {
		if _, err := s.apply(ctx, state.Command{Act: state.Timeout{Jobs: late}}); err != nil {
			if ctx.Err() == nil {
				s.log.Error("ending jobs past their walltime", "err", err)
			}
			return loopOutcome{Failed: true}, v
		}
		return loopOutcome{Committed: true}, v
	}
	if done, err := s.stopInTheWay(ctx, v, now); err != nil || done {
		if err != nil && ctx.Err() == nil {
			s.log.Error("stopping the jobs in a reservation's way", "err", err)
		}
		return loopOutcome{Committed: done, Failed: err != nil}, v
	}
	done, nextWarn, err := s.suspendPass(ctx, v, now)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.log.Error("sending warning signals or resuming suspended jobs", "err", err)
		}
		return loopOutcome{Failed: true}, v
	case done:
		return loopOutcome{Committed: true}, v
	}
	// After a restore into an empty state, the adoption window
	// (replicated: a leader elected meanwhile holds it too): the nodes
	// announce what they run first. Once it has closed, what is still
	// adopting is ended, once per window.
	hold := v.AdoptUntil()
	if now.Before(hold) {
		return loopOutcome{HeldUntil: hold}, v
	}
	if !hold.IsZero() && !hold.Equal(s.adoptEnded) {
		if ids := v.AdoptingAfter(now); len(ids) > 0 || s.raft.WriteSchema() >= state.SchemaAdoptWindow {
			if err := s.endAdopting(ctx, ids); err != nil {
				if ctx.Err() == nil {
					s.log.Error("ending the jobs still adopting after the adoption window", "err", err)
				}
				return loopOutcome{Failed: true}, v
			}
			s.adoptEnded = hold
			return loopOutcome{Committed: true}, v
		}
		s.adoptEnded = hold
	}
	began := time.Now()
	snap := s.backlog.snapshot(v, s.nodes.open(v), now)
	if s.raft.WriteSchema() < state.SchemaPreempt {
		noPreemption(&snap) // a peer of the previous release would not stop the victims
	}
	plan := core.Schedule(snap, now)
	s.metrics.pass.Observe(time.Since(began).Seconds())
	s.setStarts(plan.Starts)
	if !plan.Empty() {
		sp := fromCore(plan)
		s.metrics.stages.placing(v, sp, s.cfg.Clock())
		_, err := s.apply(ctx, state.Command{Act: state.Place{Plan: sp}})
		s.metrics.stages.placed(s.st.Snapshot(), sp, err == nil)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("committing plan", "err", err)
			}
			return loopOutcome{Failed: true}, v
		}
		s.metrics.placements.Add(float64(len(plan.Placements)))
		return loopOutcome{Committed: true}, v
	}
	if h := testHookIdle.Load(); h != nil {
		idx, _ := v.Index()
		(*h)(s.replica, idx)
	}
	// A reservation's window opening or closing changes what may start:
	// look again then.
	if e := v.NextReservationEdge(now); !e.IsZero() && (nextLate.IsZero() || e.Before(nextLate)) {
		nextLate = e
	}
	return loopOutcome{NextLate: nextLate, NextWarn: nextWarn, Full: roomless(snap)}, v
}

// roomless tells whether no node of snap has the CPU free for the
// smallest container its queued jobs ask for (held ones aside): none of
// them could start without preemption, nor could a new job asking as
// much or more.
func roomless(snap core.Snapshot) bool {
	least := int64(-1)
	for i := range snap.Queue {
		if snap.Queue[i].Held {
			continue
		}
		for _, c := range snap.Queue[i].Containers {
			if least < 0 || c.CPUMilli < least {
				least = c.CPUMilli
			}
		}
	}
	if least <= 0 {
		return false
	}
	for i := range snap.Nodes {
		if snap.Nodes[i].Free.CPUMilli >= least {
			return false
		}
	}
	return true
}

func watch(ctx context.Context, ws interface{ WatchCtx(context.Context) error }) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		_ = ws.WatchCtx(ctx)
		close(ch)
	}()
	return ch
}

// setStarts keeps the last pass's start estimates of reserved jobs.
func (s *scheduler) setStarts(est []core.StartEstimate) {
	m := make(map[uint64]time.Time, len(est))
	for _, e := range est {
		m[e.JobID] = e.Start
	}
	s.mu.Lock()
	s.starts = m
	s.mu.Unlock()
}

// rank is a pending job's priority and queue position in the last pass.
type rank struct {
	factors  api.PriorityFactors
	pos, len int
}

// endAdopting ends ids, the jobs still adopting once the adoption window
// has closed: with AdoptEnd (each FAILED with why, or requeued; and the
// arrays given the element rows the window held back) when every peer
// reads the schema that has it (state.SchemaAdoptWindow); else, a peer
// of an older release being in the cluster, each with the kill that
// release applies (CANCELLED; the nodes then stop their adopted
// containers, which no job assigns).
func (s *scheduler) endAdopting(ctx context.Context, ids []uint64) error {
	if s.raft.WriteSchema() >= state.SchemaAdoptWindow {
		_, err := s.apply(ctx, state.Command{Act: state.AdoptEnd{}})
		return err
	}
	if len(ids) > 0 {
		s.log.Warn("a peer reads an older schema than the adoption window's end: cancelling the jobs still adopting", "jobs", len(ids), "schema", s.raft.WriteSchema())
	}
	for _, id := range ids {
		if _, err := s.apply(ctx, state.Command{Act: state.Kill{Job: state.JobRef{ID: id}}}); err != nil && !errors.Is(err, state.ErrEnded) {
			return fmt.Errorf("cancelling job %d: %w", id, err)
		}
	}
	return nil
}
