package sim

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A window from 100 s for 50 s on the whole machine: a job whose
// estimate crosses it waits until it has closed, one that ends before it
// runs at once; without the window both run at once.
func TestReplayReservations(t *testing.T) {
	rs, err := ReadReservations(strings.NewReader("# a window\npm 100s 50s all maint\n"), "pm.resv", 0)
	if err != nil || len(rs) != 1 || !rs[0].Maint || len(rs[0].Nodes) != 1 || rs[0].Nodes[0] != "n00000" {
		t.Fatalf("read %+v, %v", rs, err)
	}
	js := []Job{
		{ID: 1, User: "a", Submit: 0, Run: 100, Estimate: 200, Procs: 4}, // crosses the window
		{ID: 2, User: "b", Submit: 0, Run: 50, Estimate: 60, Procs: 4},   // ends before it
	}
	pol, fair, _ := Policy("easy")
	o := Options{Procs: 10, Policy: pol, FairShare: fair}
	free, err := Run(js, o, time.Now)
	if err != nil || free.Starts[1] != 0 || free.Starts[2] != 0 {
		t.Fatalf("without the window: starts %v, %v", free.Starts, err)
	}
	o.Reservations = rs
	r, err := Run(js, o, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if r.Starts[1] != 150 || r.Starts[2] != 0 {
		t.Errorf("with the window: job 1 started at %d (want 150, its end), job 2 at %d (want 0)", r.Starts[1], r.Starts[2])
	}
	if r.Reserved <= 0 || r.IdleWaiting <= free.IdleWaiting {
		t.Errorf("reserved %g, idle while waiting %g (without: %g)", r.Reserved, r.IdleWaiting, free.IdleWaiting)
	}
	// A weekly window rolls on: the week after, the same.
	rs, err = ReadReservations(strings.NewReader("pm 100s 50s 1 weekly\n"), "pm.resv", 2)
	if err != nil || rs[0].Period != 7*24*time.Hour || len(rs[0].Nodes) != 1 {
		t.Fatalf("read %+v, %v", rs, err)
	}
	week := int64(7 * 24 * 3600)
	js = []Job{{ID: 1, User: "a", Submit: week, Run: 100, Estimate: 200, Procs: 4}}
	o = Options{Procs: 8, Nodes: 2, Policy: pol, Reservations: rs}
	if r, err = Run(js, o, time.Now); err != nil || r.Starts[1] != week {
		t.Errorf("a 4-processor job with a node outside the window: start %d, %v", r.Starts[1]-week, err)
	}
	js[0].Procs = 8
	if r, err = Run(js, o, time.Now); err != nil || r.Starts[1] != week+150 {
		t.Errorf("the whole machine, a week on: start %d after the week, want 150; %v", r.Starts[1]-week, err)
	}
	for _, bad := range []string{"pm 1h", "pm x 4h all", "pm 1h 4h n00009", "pm 1h 4h all fortnightly", "pm 1h 25h all daily", "a 1h 1h all\na 2h 1h all"} {
		if _, err := ReadReservations(strings.NewReader(bad), "bad.resv", 2); !errors.Is(err, ErrReservations) || !strings.Contains(err.Error(), "bad.resv:") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
