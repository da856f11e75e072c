package state

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

func (h *harness) applyErr(c Command) error {
	h.t.Helper()
	h.idx++
	c.Time = t0.Add(time.Duration(h.idx) * time.Second)
	c.Version = SchemaVersion
	_, err := h.st.Apply(h.idx, c)
	return err
}

// A reservation is made, refused where it would clash, updated, kept
// by a snapshot's round trip and deleted.
func TestReservationCommands(t *testing.T) {
	h := newHarness(t)
	r := &Reservation{Name: "pm", Start: t0.Add(time.Hour), Duration: 4 * time.Hour, Nodes: []string{"n1"}, Maint: true, By: "root"}
	h.apply(Command{Act: CreateReservation{Reservation: r}})
	got := h.st.Snapshot().Reservation("pm")
	if got == nil || !got.Maint || got.Created.IsZero() || got.ModifyIndex != h.idx {
		t.Fatalf("made %+v", got)
	}
	if err := h.applyErr(Command{Act: CreateReservation{Reservation: r}}); !errors.Is(err, ErrConflict) {
		t.Errorf("second create: %v, want a conflict", err)
	}
	// Another on the same node at an overlapping time.
	o := &Reservation{Name: "course", Start: t0.Add(4 * time.Hour), Duration: time.Hour, Nodes: []string{"n1"}}
	if err := h.applyErr(Command{Act: CreateReservation{Reservation: o}}); !errors.Is(err, ErrConflict) {
		t.Errorf("overlapping create: %v, want a conflict", err)
	}
	// A daily one whose third day falls into a later one-off window.
	d := &Reservation{Name: "daily", Start: t0.Add(6 * time.Hour), Duration: time.Hour, Nodes: []string{"n1"}, Repeat: RepeatDaily}
	h.apply(Command{Act: CreateReservation{Reservation: d}})
	late := &Reservation{Name: "late", Start: t0.Add(54*time.Hour + 30*time.Minute), Duration: time.Hour, Nodes: []string{"n1"}}
	if err := h.applyErr(Command{Act: CreateReservation{Reservation: late}}); !errors.Is(err, ErrConflict) {
		t.Errorf("create over a daily window's third day: %v, want a conflict", err)
	}
	for _, bad := range []*Reservation{
		{Name: "x", Start: t0, Duration: time.Hour, Nodes: []string{"n9"}},
		{Name: "y", Start: t0.Add(time.Hour), Duration: 0, Nodes: []string{"n1"}},
		{Name: "z", Start: t0.Add(-2 * time.Hour), Duration: time.Hour, Nodes: []string{"n1"}},
		{Name: "w", Start: t0.Add(time.Hour), Duration: 25 * time.Hour, Nodes: []string{"n1"}, Repeat: RepeatDaily},
	} {
		if err := h.applyErr(Command{Act: CreateReservation{Reservation: bad}}); err == nil {
			t.Errorf("made %+v", bad)
		}
	}
	// Update: the whole row, its creation kept.
	u := *got
	u.Users, u.Duration = []string{"ops"}, 2*time.Hour
	h.apply(Command{Act: UpdateReservation{Reservation: &u}})
	if g := h.st.Snapshot().Reservation("pm"); g.Duration != 2*time.Hour || len(g.Users) != 1 || !g.Created.Equal(got.Created) {
		t.Errorf("updated %+v", g)
	}
	// A restart (snapshot round trip) keeps them.
	st := New()
	if err := st.Restore(h.st.Snapshot().Dump()); err != nil {
		t.Fatal(err)
	}
	if rs := st.Snapshot().Reservations(); len(rs) != 2 || rs[1].Name != "pm" || rs[1].Duration != 2*time.Hour {
		t.Fatalf("restored %+v", rs)
	}
	// Once a reservation's last window has ended, its name is free again.
	h.apply(Command{Act: CreateReservation{Reservation: &Reservation{Name: "soon", Start: t0.Add(time.Minute), Duration: time.Minute, Nodes: []string{"n1"}}}})
	h.idx += 200 // past its end
	h.apply(Command{Act: CreateReservation{Reservation: &Reservation{Name: "soon", Start: t0.Add(time.Hour * 100), Duration: time.Minute, Nodes: []string{"n1"}}}})
	h.apply(Command{Act: DeleteReservation{Name: "pm"}})
	if h.st.Snapshot().Reservation("pm") != nil {
		t.Error("deleted reservation still there")
	}
	if err := h.applyErr(Command{Act: DeleteReservation{Name: "pm"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
}

// A reservation over a node whose running job would run into the window
// is refused, unless it ignores jobs; a job that ends before it does not
// stand in the way.
func TestReservationRunningJobs(t *testing.T) {
	h := newHarness(t)
	id := h.runJob("ann", "phys") // no walltime: it never ends
	r := &Reservation{Name: "pm", Start: t0.Add(time.Hour), Duration: time.Hour, Nodes: []string{"n1"}, Maint: true}
	if err := h.applyErr(Command{Act: CreateReservation{Reservation: r}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("create over running job %d: %v, want a conflict", id, err)
	}
	r.IgnoreJobs = true
	h.apply(Command{Act: CreateReservation{Reservation: r}})

	h = newHarness(t)
	j := session(1)
	j.Walltime = 10 * time.Minute
	id = h.apply(Command{Act: Submit{Jobs: []*Job{j}}}).([]uint64)[0]
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: id, Nodes: []string{"n1"}}}}}})
	r.IgnoreJobs = false
	h.apply(Command{Act: CreateReservation{Reservation: r}})
}

// The next edge is the next window's opening, then its close; a daily
// one rolls on.
func TestReservationEdges(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: CreateReservation{Reservation: &Reservation{Name: "d", Start: t0.Add(time.Hour), Duration: time.Hour, Nodes: []string{"n1"}, Repeat: RepeatDaily}}})
	v := h.st.Snapshot()
	if e := v.NextReservationEdge(t0); !e.Equal(t0.Add(time.Hour)) {
		t.Errorf("edge %v", e)
	}
	if e := v.NextReservationEdge(t0.Add(90 * time.Minute)); !e.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("edge %v", e)
	}
	if e := v.NextReservationEdge(t0.Add(3 * time.Hour)); !e.Equal(t0.Add(25 * time.Hour)) {
		t.Errorf("edge %v", e)
	}
}

// The reservations' acts are new in schema 11: they read back as
// themselves from an entry of it, and have no form in an older schema,
// where writing one is refused (a peer of the previous release would
// stop on it).
func TestReservationActsOfEverySchema(t *testing.T) {
	at := t0.Round(0)
	r := &Reservation{Name: "pm", Start: at.Add(time.Hour), Duration: time.Hour, Nodes: []string{"n1"}, Maint: true, Repeat: RepeatDaily}
	for _, a := range []Act{CreateReservation{Reservation: r}, UpdateReservation{Reservation: r}, DeleteReservation{Name: "pm"}} {
		if n := (&Command{Act: a}).NeedsSchema(); n != 11 || SchemaReservations != 11 {
			t.Errorf("%s needs schema %d, want 11", a.Kind(), n)
		}
		b, err := json.Marshal(Command{Version: SchemaVersion, Time: at, Act: a})
		if err != nil {
			t.Fatalf("%s: %v", a.Kind(), err)
		}
		var back Command
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v: %s", a.Kind(), err, b)
		}
		if !reflect.DeepEqual(back.Act, a) || back.Kind() != a.Kind() {
			t.Errorf("%s reads back as %#v, want %#v (%s)", a.Kind(), back.Act, a, b)
		}
		for _, v := range []int{OldestSchema, SchemaVersion - 1} {
			if b, err := json.Marshal(Command{Version: v, Time: at, Act: a}); !errors.Is(err, ErrNoOldForm) {
				t.Errorf("%s written in schema %d: %s, %v; want ErrNoOldForm", a.Kind(), v, b, err)
			}
		}
	}
	if n := (&Command{Act: Charge{}}).NeedsSchema(); n != 0 {
		t.Errorf("charge needs schema %d, want any", n)
	}
}
