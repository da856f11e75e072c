package core

import (
	"slices"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/reason"
)

var t0 = time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)

// one 4-cpu node, a maintenance window on it from t0+1h for 4h.
func maintSnap(jobs ...Job) Snapshot {
	return Snapshot{
		Nodes:        []Node{node("a", 4, 16)},
		Queue:        jobs,
		Policy:       DefaultPolicy(),
		Reservations: []Reservation{{Name: "maint", Start: t0.Add(time.Hour), Duration: 4 * time.Hour, Nodes: []string{"a"}, Maint: true}},
	}
}

func walled(id uint64, cpu int64, w time.Duration) Job {
	j := gang(id, ModeSingleNode, 1, cpu)
	j.Walltime, j.Submit = w, t0
	return j
}

func placed(p Plan, id uint64) []string {
	for _, pl := range p.Placements {
		if pl.JobID == id {
			return pl.Nodes
		}
	}
	return nil
}

func reasonOf(p Plan, id uint64) string {
	for _, r := range p.Reasons {
		if r.JobID == id {
			return r.Reason
		}
	}
	return ""
}

// A job whose walltime crosses the window's start does not start on its
// nodes and says why; one that ends before it does.
func TestReservationCrossingRefused(t *testing.T) {
	p := Schedule(maintSnap(walled(1, 2, 2*time.Hour), walled(2, 2, 30*time.Minute)), t0)
	if placed(p, 1) != nil {
		t.Fatalf("job 1 (2h, crosses the window at +1h) placed: %+v", p.Placements)
	}
	if got := reasonOf(p, 1); got != reason.Maintenance {
		t.Errorf("job 1 reason %q, want %q", got, reason.Maintenance)
	}
	if got := placed(p, 2); !slices.Equal(got, []string{"a"}) {
		t.Errorf("job 2 (30m, ends before the window) placed on %v, want [a]", got)
	}
	// Its start estimate is after the window.
	for _, st := range p.Starts {
		if st.JobID == 1 && st.Start.Before(t0.Add(5*time.Hour)) {
			t.Errorf("job 1 estimated to start at %v, inside the window", st.Start)
		}
	}
	if !slices.ContainsFunc(p.Starts, func(s StartEstimate) bool { return s.JobID == 1 && s.Start.Equal(t0.Add(5*time.Hour)) }) {
		t.Errorf("no start estimate at the window's end for job 1: %+v", p.Starts)
	}
}

// A job without a walltime never ends: it never starts ahead of a window.
func TestReservationUnboundedRefused(t *testing.T) {
	p := Schedule(maintSnap(walled(1, 1, 0)), t0)
	if placed(p, 1) != nil {
		t.Fatalf("a job without walltime started ahead of the window: %+v", p.Placements)
	}
}

// Another reservation's reason names it.
func TestReservationReasonNamesIt(t *testing.T) {
	s := maintSnap(walled(1, 2, 2*time.Hour))
	s.Reservations[0].Maint, s.Reservations[0].Name = false, "course"
	p := Schedule(s, t0)
	if got := reasonOf(p, 1); got != reason.ReservedFor("course") {
		t.Errorf("reason %q, want %q", got, reason.ReservedFor("course"))
	}
}

// Inside the window nothing outside the reservation starts; the
// reservation's own jobs do, only there, ending by its end.
func TestReservationWindow(t *testing.T) {
	in := walled(1, 1, time.Hour)
	in.Reservation = "maint"
	long := walled(2, 1, 5*time.Hour)
	long.Reservation = "maint"
	out := walled(3, 1, time.Minute)
	s := maintSnap(in, long, out)
	s.Nodes = append(s.Nodes, node("b", 4, 16))
	at := t0.Add(90 * time.Minute)
	p := Schedule(s, at)
	if got := placed(p, 1); !slices.Equal(got, []string{"a"}) {
		t.Errorf("job in the reservation placed on %v, want [a]", got)
	}
	if placed(p, 2) != nil || reasonOf(p, 2) != reason.Reservation {
		t.Errorf("job crossing its reservation's end: placed %v reason %q, want none and %q", placed(p, 2), reasonOf(p, 2), reason.Reservation)
	}
	if got := placed(p, 3); !slices.Equal(got, []string{"b"}) {
		t.Errorf("job outside placed on %v, want [b] (a is in maintenance)", got)
	}
	// Before the window, the reservation's job waits with its start.
	p = Schedule(maintSnap(in), t0)
	if placed(p, 1) != nil || reasonOf(p, 1) != reason.Reservation {
		t.Errorf("before the window: placed %v reason %q", placed(p, 1), reasonOf(p, 1))
	}
	if len(p.Starts) != 1 || !p.Starts[0].Start.Equal(t0.Add(time.Hour)) {
		t.Errorf("start estimate %+v, want the window's start", p.Starts)
	}
	// A name not in the snapshot.
	gone := walled(4, 1, time.Hour)
	gone.Reservation = "nope"
	if p = Schedule(maintSnap(gone), t0); reasonOf(p, 4) != reason.ReservationDeleted {
		t.Errorf("reason %q, want %q", reasonOf(p, 4), reason.ReservationDeleted)
	}
	// After a one-off window, the node is everyone's again.
	if p = Schedule(maintSnap(walled(5, 1, 0)), t0.Add(5*time.Hour)); placed(p, 5) == nil {
		t.Errorf("job not placed after the window ended: %+v", p)
	}
}

// A daily reservation rolls forward: after today's window, tomorrow's
// holds the node back from a job that would cross it.
func TestReservationRollsForward(t *testing.T) {
	r := Reservation{Name: "d", Start: t0, Duration: time.Hour, Period: 24 * time.Hour, Nodes: []string{"a"}}
	now := t0.Add(3 * 24 * time.Hour).Add(2 * time.Hour) // day 3, after its window
	s, e, ok := r.Window(now)
	if !ok || !s.Equal(t0.Add(4*24*time.Hour)) || !e.Equal(s.Add(time.Hour)) {
		t.Fatalf("Window = %v %v %v, want day 4 at 06:00", s, e, ok)
	}
	if !r.Active(t0.Add(2*24*time.Hour + 30*time.Minute)) {
		t.Error("not active inside day 2's window")
	}
	snap := Snapshot{Nodes: []Node{node("a", 4, 16)}, Policy: DefaultPolicy(), Reservations: []Reservation{r},
		Queue: []Job{walled(1, 1, 23*time.Hour), walled(2, 1, 21*time.Hour)}}
	p := Schedule(snap, now)
	if placed(p, 1) != nil {
		t.Errorf("23h job crosses tomorrow's window but started")
	}
	if placed(p, 2) == nil {
		t.Errorf("21h job ends before tomorrow's window but did not start: %+v", p)
	}
	// Once a one-off has ended, it is no longer in force.
	r.Period = 0
	if _, _, ok := r.Window(now); ok {
		t.Error("a one-off window in force after its end")
	}
}

// Strict FIFO (no backfill) honours reservations too.
func TestReservationNoBackfill(t *testing.T) {
	s := maintSnap(walled(1, 2, 2*time.Hour))
	s.Policy = Policy{}
	p := Schedule(s, t0)
	if placed(p, 1) != nil || reasonOf(p, 1) != reason.Maintenance {
		t.Errorf("placed %v reason %q", placed(p, 1), reasonOf(p, 1))
	}
}

// A job below the backfill reservations (the depth is full) that only a
// window keeps off a node says so too, and the start estimate of the
// reserved job lands after the window.
func TestReservationBackfillCandidate(t *testing.T) {
	s := maintSnap(walled(1, 4, 2*time.Hour), walled(2, 1, 3*time.Hour))
	s.Queue[1].Submit = t0.Add(time.Second)
	p := Schedule(s, t0)
	if len(p.Placements) != 0 {
		t.Fatalf("placed %+v", p.Placements)
	}
	for _, id := range []uint64{1, 2} {
		if got := reasonOf(p, id); got != reason.Maintenance {
			t.Errorf("job %d reason %q, want %q", id, got, reason.Maintenance)
		}
	}
}

// Licenses and a window together: a job short of licenses says so
// first, and its start estimate is the first time both its licenses
// are free and no window holds its node for its walltime (the licenses
// come free at +30m, the window holds the node from +1h to +5h).
func TestReservationWithLicenses(t *testing.T) {
	first, second := walled(1, 1, 30*time.Minute), walled(2, 1, 2*time.Hour)
	first.Licenses, second.Licenses = map[string]int{"matlab": 1}, map[string]int{"matlab": 1}
	s := maintSnap(first, second)
	s.Licenses = map[string]int{"matlab": 1}
	p := Schedule(s, t0)
	if !slices.Equal(placed(p, 1), []string{"a"}) || placed(p, 2) != nil {
		t.Fatalf("placed %+v; want job 1 on a, not job 2", p.Placements)
	}
	if got := reasonOf(p, 2); got != reason.Licenses {
		t.Errorf("job 2 reason %q, want %q", got, reason.Licenses)
	}
	if !slices.ContainsFunc(p.Starts, func(s StartEstimate) bool { return s.JobID == 2 && s.Start.Equal(t0.Add(5*time.Hour)) }) {
		t.Errorf("start estimates %+v; want job 2 at the window's end, +5h", p.Starts)
	}
}
