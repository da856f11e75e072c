package core

import (
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/reason"
)

// starveSnapshot is one 4-CPU node held until t0+100s by a running job,
// and two whole-node jobs queued: old (submitted age before t0, fair share
// 0.1, reason given) and fresh (submitted at t0, fair share 1, so of
// higher priority under the weights given).
func starveSnapshot(pol Policy, age time.Duration, oldReason string) (Snapshot, time.Time) {
	t0 := time.Unix(1_000_000, 0)
	n := node("a", 4, 16)
	n.Free = Res{Memory: 16 * gib}
	job := func(id uint64, submit time.Time, fs float64, reason string) Job {
		j := gang(id, ModeSingleNode, 1, 4)
		j.Submit, j.FairShare, j.Reason, j.Walltime, j.Partition = submit, fs, reason, time.Hour, "p"
		return j
	}
	return Snapshot{
		Nodes: []Node{n},
		Queue: []Job{job(1, t0.Add(-age), 0.1, oldReason), job(2, t0, 1, reason.Priority)},
		Running: []Running{{JobID: 9, Start: t0.Add(-time.Minute), Walltime: 101 * time.Second, Nodes: []string{"a"},
			Containers: []Res{{CPUMilli: 4000, Memory: 0}}}},
		Partitions: map[string]Partition{"p": {}},
		Policy:     pol,
	}, t0
}

// reservedJob is the one job the plan reserves for.
func reservedJob(t *testing.T, p Plan) uint64 {
	t.Helper()
	if len(p.Starts) != 1 {
		t.Fatalf("want one reservation, got %+v", p.Starts)
	}
	return p.Starts[0].JobID
}

// A reservation is kept until its job starts: a job of higher priority
// that comes later does not take it.
func TestKeepReservation(t *testing.T) {
	pol := Policy{Weights: Weights{FairShare: 10000, Age: 1}, ReservationDepth: 1}
	s, now := starveSnapshot(pol, time.Minute, reason.Resources)
	if got := reservedJob(t, Schedule(s, now)); got != 2 {
		t.Fatalf("without KeepReservations job %d reserved; want the higher priority job 2", got)
	}
	s.Policy.KeepReservations = true
	p := Schedule(s, now)
	if got := reservedJob(t, p); got != 1 {
		t.Fatalf("with KeepReservations job %d reserved; want job 1, which held the reservation", got)
	}
	if want := now.Add(41 * time.Second); !p.Starts[0].Start.Equal(want) {
		t.Errorf("job 1 starts %v, want %v (when the running job's walltime ends)", p.Starts[0].Start, want)
	}
	if len(p.Reasons) != 0 || len(p.Placements) != 0 {
		t.Errorf("plan %+v: want nothing placed and no reason changed", p)
	}
}

// A job pending past the starvation threshold goes before jobs of higher
// priority and gets the reservation; the partition's threshold overrides
// the policy's.
func TestStarvationThreshold(t *testing.T) {
	pol := Policy{Weights: Weights{FairShare: 10000, Age: 1}, ReservationDepth: 1, StarvationAge: 6 * time.Hour}
	s, now := starveSnapshot(pol, 7*time.Hour, reason.Priority)
	if got := reservedJob(t, Schedule(s, now)); got != 1 {
		t.Fatalf("job %d reserved; want job 1, pending 7h past a 6h threshold", got)
	}
	s.Partitions["p"] = Partition{StarvationAge: 8 * time.Hour}
	if got := reservedJob(t, Schedule(s, now)); got != 2 {
		t.Fatalf("partition threshold 8h: job %d reserved; want the higher priority job 2", got)
	}
	s.Partitions["p"] = Partition{StarvationAge: -1}
	if got := reservedJob(t, Schedule(s, now)); got != 2 {
		t.Fatalf("partition without threshold: job %d reserved; want job 2", got)
	}
	s.Partitions["p"] = Partition{}
	s.Policy.StarvationAge = 0
	if got := reservedJob(t, Schedule(s, now)); got != 2 {
		t.Fatalf("no threshold: job %d reserved; want job 2", got)
	}
}

// Below the reservation, ShortestFirst tries the shortest job first even
// when a longer one has higher priority; the reservation still goes by
// priority.
func TestShortestFirstBackfill(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	n := node("a", 4, 16)
	n.Free = Res{CPUMilli: 2000, Memory: 14 * gib}
	job := func(id uint64, cpu int64, fs float64, wall time.Duration) Job {
		j := gang(id, ModeSingleNode, 1, cpu)
		j.Submit, j.FairShare, j.Walltime = t0, fs, wall
		return j
	}
	s := Snapshot{
		Nodes: []Node{n},
		Queue: []Job{job(1, 4, 1, time.Hour), job(2, 2, 0.9, 90*time.Second), job(3, 2, 0.5, 10*time.Second)},
		Running: []Running{{JobID: 9, Start: t0, Walltime: 100 * time.Second, Nodes: []string{"a"},
			Containers: []Res{{CPUMilli: 2000, Memory: 2 * gib}}}},
		Policy: Policy{Weights: Weights{FairShare: 1}, ReservationDepth: 1},
	}
	started := func() uint64 {
		p := Schedule(s, t0)
		if len(p.Placements) != 1 || !p.Placements[0].Backfilled || reservedJob(t, p) != 1 {
			t.Fatalf("plan %+v: want one backfilled job and job 1 reserved", p)
		}
		return p.Placements[0].JobID
	}
	if got := started(); got != 2 {
		t.Fatalf("priority order: job %d backfilled, want 2", got)
	}
	s.Policy.ShortestFirst = true
	if got := started(); got != 3 {
		t.Fatalf("shortest first: job %d backfilled, want the 10 s job 3", got)
	}
}
