package core

import (
	"slices"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/reason"
)

// depthSnapshot is one 4-CPU node held until now+100s by a running job,
// and n whole-node jobs queued, of falling priority (fair share), each
// of an hour, with no reason yet.
func depthSnapshot(n int) (Snapshot, time.Time) {
	t0 := time.Unix(1_000_000, 0)
	nd := node("a", 4, 16)
	nd.Free = Res{Memory: 16 * gib}
	s := Snapshot{
		Nodes: []Node{nd},
		Running: []Running{{JobID: 999, Start: t0, Walltime: 100 * time.Second, Nodes: []string{"a"},
			Containers: []Res{{CPUMilli: 4000}}}},
		Partitions: map[string]Partition{"p": {}},
		Policy:     DefaultPolicy(),
	}
	for i := range n {
		j := gang(uint64(i+1), ModeSingleNode, 1, 4)
		j.Submit, j.FairShare, j.Walltime, j.Partition = t0, 1-float64(i)/float64(n), time.Hour, "p"
		s.Queue = append(s.Queue, j)
	}
	return s, t0
}

// changedFor are the jobs whose reason p changes.
func changedFor(p Plan) []uint64 {
	var out []uint64
	for _, r := range p.Reasons {
		out = append(out, r.JobID)
	}
	slices.Sort(out)
	return out
}

// A pass tries QueueDepth jobs in priority order: the first gets the
// reservation, the next ones Priority, and the jobs past the depth keep
// their reason (none here) until a later pass tries them.
func TestQueueDepthBoundsThePass(t *testing.T) {
	s, now := depthSnapshot(10)
	s.Policy.QueueDepth = 3
	p := Schedule(s, now)
	if got := changedFor(p); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("reasons changed for jobs %v; want the 3 of highest priority, 1-3 (plan %+v)", got, p)
	}
	if got := reservedJob(t, p); got != 1 {
		t.Fatalf("job %d reserved; want job 1, of highest priority", got)
	}
	s.Policy.QueueDepth = 0
	if got := changedFor(Schedule(s, now)); len(got) != 10 {
		t.Fatalf("without a depth, reasons changed for jobs %v; want all 10", got)
	}

	// The next pass, once the first three have started: the next three
	// are tried, and the last keep their reason.
	s.Policy.QueueDepth = 3
	s.Queue = s.Queue[3:]
	if got := changedFor(Schedule(s, now)); !slices.Equal(got, []uint64{4, 5, 6}) {
		t.Fatalf("second pass: reasons changed for jobs %v; want 4-6", got)
	}
}

// The bound keeps the starvation guarantee: a job past the starvation
// threshold, last by priority, is tried first and gets the reservation;
// a job that kept a reservation from an earlier pass keeps it whatever
// the depth; and the job of highest priority is tried though the jobs
// before the priority order fill the depth.
func TestQueueDepthKeepsStarvingAndReserved(t *testing.T) {
	s, now := depthSnapshot(10)
	s.Policy.QueueDepth = 2
	s.Queue[9].Submit = now.Add(-7 * time.Hour) // past DefaultStarvationAge, lowest priority
	p := Schedule(s, now)
	if got := reservedJob(t, p); got != 10 {
		t.Fatalf("job %d reserved; want job 10, pending 7h past the starvation threshold", got)
	}
	if got := changedFor(p); !slices.Equal(got, []uint64{1, 10}) {
		t.Fatalf("reasons changed for jobs %v; want the starving job 10 and the first by priority, 1", got)
	}

	// Job 8 holds the reservation from an earlier pass; two starving
	// jobs fill a depth of 2: job 8 keeps its reservation, the starving
	// jobs are tried oldest first (the oldest gets a reservation, as
	// the reservation depth allows), and so is job 1, the first by
	// priority. With a depth of 1, the younger
	// starving job waits for a later pass with its reason.
	s, now = depthSnapshot(10)
	s.Policy.QueueDepth = 2
	s.Queue[7].Reason = reason.Resources
	s.Queue[8].Submit = now.Add(-8 * time.Hour)
	s.Queue[9].Submit = now.Add(-7 * time.Hour)
	p = Schedule(s, now)
	if got := reservedJobs(p); !slices.Equal(got, []uint64{8, 9}) {
		t.Fatalf("jobs %v reserved; want job 8, which kept its reservation, and the oldest starving job 9", got)
	}
	if got := changedFor(p); !slices.Equal(got, []uint64{1, 9, 10}) {
		t.Fatalf("reasons changed for jobs %v; want the starving jobs 9 and 10 and job 1, first by priority", got)
	}
	s.Policy.QueueDepth = 1
	p = Schedule(s, now)
	if got := reservedJobs(p); !slices.Equal(got, []uint64{8, 9}) {
		t.Fatalf("depth 1: jobs %v reserved; want job 8, which kept its reservation, and the oldest starving job 9", got)
	}
	if got := changedFor(p); !slices.Equal(got, []uint64{1, 9}) {
		t.Fatalf("depth 1: reasons changed for jobs %v; want the oldest starving job 9 and job 1, first by priority", got)
	}
}

// reservedJobs are the jobs p reserves for, by id.
func reservedJobs(p Plan) []uint64 {
	var out []uint64
	for _, st := range p.Starts {
		out = append(out, st.JobID)
	}
	slices.Sort(out)
	return out
}

// The depth is per partition: a partition whose queue cannot start (its
// node is full), of higher priority and past the depth, does not keep
// another partition's job from being tried and started.
func TestQueueDepthPerPartition(t *testing.T) {
	s, now := depthSnapshot(10)
	s.Policy.QueueDepth = 3
	q := node("b", 4, 16)
	q.Partitions = []string{"q"}
	s.Nodes[0].Partitions = []string{"p"}
	s.Nodes = append(s.Nodes, q)
	s.Partitions["q"] = Partition{}
	j := gang(11, ModeSingleNode, 1, 4)
	j.Submit, j.FairShare, j.Walltime, j.Partition = now, 0, time.Hour, "q"
	s.Queue = append(s.Queue, j)
	p := Schedule(s, now)
	if len(p.Placements) != 1 || p.Placements[0].JobID != 11 {
		t.Fatalf("placements %+v; want job 11 of partition q started, last by priority behind a full partition p", p.Placements)
	}
	if got := changedFor(p); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("reasons changed for jobs %v; want partition p's first 3, 1-3", got)
	}
}
