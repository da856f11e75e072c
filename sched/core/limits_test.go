package core

import (
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/reason"
)

// limitsPlan runs s and returns who was placed and the reasons set.
func limitsPlan(s Snapshot, now time.Time) (map[uint64]bool, map[uint64]string, Plan) {
	plan := Schedule(s, now)
	placed := map[uint64]bool{}
	for _, pl := range plan.Placements {
		placed[pl.JobID] = true
	}
	reasons := map[uint64]string{}
	for _, r := range plan.Reasons {
		reasons[r.JobID] = r.Reason
	}
	return placed, reasons, plan
}

func userJob(id uint64, user, part string, cpu int64) Job {
	j := gang(id, ModeSingleNode, 1, cpu)
	j.User, j.Partition = user, part
	return j
}

// TestUserLimitJobs: with one running job per user allowed in partition
// p, alice (one running there) waits AccountLimit for both her jobs in
// p, while bob's job behind hers starts, and so does her job in
// partition q, which has no limit.
func TestUserLimitJobs(t *testing.T) {
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	s := Snapshot{
		Nodes:      []Node{node("a", 16, 64)},
		Partitions: map[string]Partition{"p": {UserLimits: Limits{Jobs: 1}}},
		Running: []Running{{JobID: 9, User: "alice", Partition: "p", Start: now.Add(-time.Minute),
			Nodes: []string{"a"}, Containers: []Res{{CPUMilli: 1000, Memory: gib}}}},
		Queue: []Job{userJob(1, "alice", "p", 1), userJob(2, "bob", "p", 1), userJob(3, "alice", "p", 1),
			userJob(4, "alice", "q", 1), userJob(5, "bob", "p", 1)},
	}
	s.Nodes[0].Free.CPUMilli -= 1000
	placed, reasons, _ := limitsPlan(s, now)
	if !placed[2] || !placed[4] || placed[1] || placed[3] || placed[5] || len(placed) != 2 {
		t.Fatalf("placed %v, want bob's 2 and alice's 4 (q) only", placed)
	}
	for _, id := range []uint64{1, 3, 5} { // bob's second job: his first started in this pass
		if reasons[id] != reason.AccountLimit {
			t.Errorf("job %d: reason %q, want %s", id, reasons[id], reason.AccountLimit)
		}
	}
	// A job already waiting AccountLimit gets no new reason.
	s.Queue[0].Reason = reason.AccountLimit
	if _, reasons, _ := limitsPlan(s, now); reasons[1] != "" {
		t.Errorf("job 1 was AccountLimit already; the plan sets %q", reasons[1])
	}
}

// TestUserLimitResources: a per-user CPU limit of 4 cores counts the
// user's placements of the pass: 3 cores start, 2 more would pass it and
// wait, 1 more fits and starts. Memory and GPU limits count alike.
func TestUserLimitResources(t *testing.T) {
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		limit Limits
		jobs  []Res
		want  []bool // placed, by job
	}{
		{"cpu", Limits{Res: Res{CPUMilli: 4000}}, []Res{{CPUMilli: 3000}, {CPUMilli: 2000}, {CPUMilli: 1000}}, []bool{true, false, true}},
		{"memory", Limits{Res: Res{Memory: 2 * gib}}, []Res{{CPUMilli: 1000, Memory: gib}, {CPUMilli: 1000, Memory: 2 * gib}, {CPUMilli: 1000, Memory: gib}}, []bool{true, false, true}},
		{"gpu", Limits{Res: Res{GPU: 1}}, []Res{{CPUMilli: 1000, GPU: 0.5}, {CPUMilli: 1000, GPU: 0.75}, {CPUMilli: 1000, GPU: 0.5}}, []bool{true, false, true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := node("a", 16, 64)
			n.Capacity.GPU, n.Free.GPU = 4, 4
			s := Snapshot{Nodes: []Node{n}, Partitions: map[string]Partition{"p": {UserLimits: tt.limit}}}
			for i, r := range tt.jobs {
				s.Queue = append(s.Queue, Job{ID: uint64(i + 1), User: "alice", Partition: "p", Containers: []Res{r}})
			}
			placed, reasons, _ := limitsPlan(s, now)
			for i, want := range tt.want {
				id := uint64(i + 1)
				if placed[id] != want {
					t.Errorf("job %d placed %v, want %v", id, placed[id], want)
				}
				if !want && reasons[id] != reason.AccountLimit {
					t.Errorf("job %d: reason %q, want %s", id, reasons[id], reason.AccountLimit)
				}
			}
		})
	}
}

// TestUserLimitHoldsNoReservation: under EASY, alice's job at the head
// would not fit now and would hold the reservation that keeps bob's long
// job from backfilling. At her limit, it is not considered at all: no
// reservation, no start estimate, and bob's job starts.
func TestUserLimitHoldsNoReservation(t *testing.T) {
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	run := func(id uint64, user string, cpu int64, w time.Duration) Running {
		return Running{JobID: id, User: user, Partition: "p", Start: now.Add(-time.Minute), Walltime: w,
			Nodes: []string{"a"}, Containers: []Res{{CPUMilli: cpu * 1000, Memory: gib}}}
	}
	mk := func(limit Limits) Snapshot {
		s := Snapshot{
			Nodes:      []Node{node("a", 8, 64)},
			Partitions: map[string]Partition{"p": {UserLimits: limit}},
			Running:    []Running{run(8, "alice", 4, time.Hour), run(9, "bob", 2, 5*time.Hour)},
			Policy:     Policy{ReservationDepth: 1},
			Queue:      []Job{userJob(1, "alice", "p", 6), userJob(2, "bob", "p", 2)},
		}
		s.Nodes[0].Free.CPUMilli, s.Nodes[0].Free.Memory = 2000, 62*gib
		s.Queue[1].Walltime = 10 * time.Hour
		return s
	}
	// Without the limit: alice's job reserves the 6 cores free when her
	// running job ends, and bob's ten-hour job would delay it.
	placed, reasons, plan := limitsPlan(mk(Limits{}), now)
	if len(placed) != 0 || reasons[1] != reason.Resources || reasons[2] != reason.Priority || len(plan.Starts) != 1 {
		t.Fatalf("unlimited: placed %v, reasons %v, starts %v", placed, reasons, plan.Starts)
	}
	placed, reasons, plan = limitsPlan(mk(Limits{Res: Res{CPUMilli: 6000}}), now)
	if !placed[2] || placed[1] || reasons[1] != reason.AccountLimit || len(plan.Starts) != 0 {
		t.Fatalf("limited: placed %v, reasons %v, starts %v; want bob's job 2 started, alice's 1 AccountLimit without a reservation",
			placed, reasons, plan.Starts)
	}
}

// TestLimitsStage: the limits stage alone, as the walk calls it: the
// array's throttle first, then the user's limits, each counting what the
// pass started (started) and leaving the snapshot as it was.
func TestLimitsStage(t *testing.T) {
	s := Snapshot{
		ArraySlots: map[uint64]int{10: 1},
		Partitions: map[string]Partition{"p": {UserLimits: Limits{Jobs: 2}}},
		Running:    []Running{{JobID: 1, User: "alice", Partition: "p", Containers: []Res{{CPUMilli: 1000}}}},
	}
	l := newLimits(&s)
	elem := userJob(11, "alice", "p", 1)
	elem.Array = 10
	if r := l.check(&elem); r != "" {
		t.Fatalf("first element: %q, want none (one slot, alice holds one job of two)", r)
	}
	l.started(&elem)
	next := elem
	next.ID = 12
	if r := l.check(&next); r != reason.ArrayTaskLimit {
		t.Errorf("second element: %q, want %s (array before user)", r, reason.ArrayTaskLimit)
	}
	plain := userJob(20, "alice", "p", 1)
	if r := l.check(&plain); r != reason.AccountLimit {
		t.Errorf("alice's third job: %q, want %s", r, reason.AccountLimit)
	}
	if bob := userJob(21, "bob", "p", 1); l.check(&bob) != "" {
		t.Error("bob's job is limited by alice's")
	}
	if s.ArraySlots[10] != 1 {
		t.Error("the stage changed its snapshot's ArraySlots")
	}
}
