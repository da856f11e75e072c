package sim

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sim/swf"
)

func TestFromSWF(t *testing.T) {
	recs := []swf.Job{
		{ID: 1, Submit: 0, Run: 0, Procs: 4, ReqTime: -1},                // runtime 0 → 1 s, estimate = runtime
		{ID: 2, Submit: 1, Run: 50, Procs: -1, ReqProcs: 8, ReqTime: 10}, // requested procs; estimate never below runtime
		{ID: 3, Submit: 2, Run: 5, Procs: 200, ReqTime: 100},             // too wide
		{ID: 4, Submit: 3, Run: -1, Procs: 2},                            // no runtime
	}
	js, dropped := FromSWF(recs, 100)
	if dropped != 2 || len(js) != 2 {
		t.Fatalf("%d jobs, %d dropped", len(js), dropped)
	}
	if js[0].Run != 1 || js[0].Estimate != 1 || js[1].Procs != 8 || js[1].Estimate != 50 {
		t.Fatalf("jobs %+v", js)
	}
}

// A hand-checked trace on 10 processors: job 1 holds 6 until 100; job 2
// (8 procs) must wait for it; job 3 (4 procs, 50 s) ends before job 2's
// shadow time and backfills under EASY but not under FCFS.
func TestEasyVersusFCFS(t *testing.T) {
	js := []Job{
		{ID: 1, User: "a", Submit: 0, Run: 100, Estimate: 100, Procs: 6},
		{ID: 2, User: "b", Submit: 10, Run: 100, Estimate: 100, Procs: 8},
		{ID: 3, User: "c", Submit: 20, Run: 50, Estimate: 50, Procs: 4},
	}
	for _, tt := range []struct {
		policy   string
		wantWait float64
	}{
		{"easy", (0 + 90 + 0) / 3.0},
		{"fcfs", (0 + 90 + 180) / 3.0},
	} {
		pol, fair, _ := Policy(tt.policy)
		r, err := Run(js, Options{Procs: 10, Policy: pol, FairShare: fair}, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if r.MeanWait != tt.wantWait || r.Jobs != 3 {
			t.Errorf("%s: mean wait %g, want %g", tt.policy, r.MeanWait, tt.wantWait)
		}
	}
}

func TestMultiNodeShape(t *testing.T) {
	js := []Job{{ID: 1, Submit: 0, Run: 10, Estimate: 10, Procs: 6}, {ID: 2, Submit: 0, Run: 10, Estimate: 10, Procs: 2}}
	pol, _, _ := Policy("easy")
	r, err := Run(js, Options{Procs: 8, Nodes: 4, Policy: pol}, time.Now)
	if err != nil || r.MeanWait != 0 || r.Placements != 2 {
		t.Fatalf("%+v %v", r, err)
	}
}

// TestUserLimits: with at most one running job per user (or 3 cores),
// alice's second job waits for her first to end while bob's job, later
// and on a machine with room for all three, starts at once. Without
// limits all three start on arrival.
func TestUserLimits(t *testing.T) {
	js := []Job{
		{ID: 1, User: "alice", Submit: 0, Run: 100, Estimate: 100, Procs: 2},
		{ID: 2, User: "alice", Submit: 0, Run: 100, Estimate: 100, Procs: 2},
		{ID: 3, User: "bob", Submit: 5, Run: 100, Estimate: 100, Procs: 2},
	}
	pol, _, _ := Policy("easy")
	for _, tt := range []struct {
		name   string
		nodes  int
		limits core.Limits
		want   map[uint64]int64
	}{
		{"none", 0, core.Limits{}, map[uint64]int64{1: 0, 2: 0, 3: 5}},
		{"one job", 0, core.Limits{Jobs: 1}, map[uint64]int64{1: 0, 2: 100, 3: 5}},
		{"three cores", 0, core.Limits{Res: core.Res{CPUMilli: 3000}}, map[uint64]int64{1: 0, 2: 100, 3: 5}},
		{"three cores, gangs", 5, core.Limits{Res: core.Res{CPUMilli: 3000}}, map[uint64]int64{1: 0, 2: 100, 3: 5}},
	} {
		r, err := Run(js, Options{Procs: 10, Nodes: tt.nodes, Policy: pol, UserLimits: tt.limits}, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(r.Starts, tt.want) {
			t.Errorf("%s: starts %v, want %v", tt.name, r.Starts, tt.want)
		}
	}
}

// TestUserLimitTooWide: a job wider than the per-user CPU limit could
// never start; Run says so instead of leaving it queued.
func TestUserLimitTooWide(t *testing.T) {
	pol, _, _ := Policy("easy")
	_, err := Run([]Job{{ID: 7, User: "a", Run: 1, Estimate: 1, Procs: 4}},
		Options{Procs: 8, Policy: pol, UserLimits: core.Limits{Res: core.Res{CPUMilli: 2000}}}, time.Now)
	if err == nil || !strings.Contains(err.Error(), "job 7 needs 4 processors") {
		t.Fatalf("err = %v", err)
	}
}
