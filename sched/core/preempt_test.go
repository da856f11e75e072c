package core

import (
	"slices"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/reason"
)

var pt0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// preemptSnap is a cluster of n 4-cpu nodes, each full with one
// single-container low-QOS job (ids 1..n, job i started i minutes ago, so
// job 1 is the youngest), and QOS high that may preempt low.
func preemptSnap(n int) Snapshot {
	s := Snapshot{
		Partitions: map[string]Partition{"batch": {PreemptMode: PreemptRequeue}},
		QOS: map[string]QOS{
			"high": {Priority: 100, Preempt: []string{"low"}},
			"low":  {Priority: 10},
		},
		Policy: DefaultPolicy(),
	}
	s.Policy.PreemptWindow = 10 * time.Minute
	for i := 1; i <= n; i++ {
		name := string(rune('a' + i - 1))
		nd := node(name, 4, 16)
		nd.Free = Res{}
		s.Nodes = append(s.Nodes, nd)
		s.Running = append(s.Running, Running{JobID: uint64(i), Start: pt0.Add(-time.Duration(i) * time.Minute),
			Walltime: 24 * time.Hour, Partition: "batch", User: "u", QOS: "low", Nodes: []string{name},
			Containers: []Res{{CPUMilli: 4000, Memory: 16 * gib}}})
	}
	return s
}

func highGang(id uint64, n int) Job {
	j := gang(id, ModeMultiNode, n, 4)
	for i := range j.Containers {
		j.Containers[i].Memory = 16 * gib
	}
	j.Partition, j.QOS, j.User, j.Submit = "batch", "high", "v", pt0
	return j
}

func victims(p Plan) []uint64 {
	var out []uint64
	for _, pr := range p.Preemptions {
		out = append(out, pr.Victim)
	}
	slices.Sort(out)
	return out
}

func TestPreemptFewestYoungest(t *testing.T) {
	s := preemptSnap(4)
	s.Queue = []Job{highGang(10, 2)}
	p := Schedule(s, pt0)
	if got := victims(p); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("victims %v; want the two youngest [1 2]", got)
	}
	for _, pr := range p.Preemptions {
		if pr.By != 10 || pr.Mode != PreemptRequeue {
			t.Fatalf("preemption %+v; want by 10, mode requeue", pr)
		}
	}
	if len(p.Placements) != 0 {
		t.Fatalf("placed %v while its victims still run", p.Placements)
	}
	if !slices.Contains(p.Reasons, ReasonChange{JobID: 10, Reason: reason.Preempting}) {
		t.Fatalf("reasons %v; want 10 Preempting", p.Reasons)
	}
}

func TestPreemptLowestRankFirst(t *testing.T) {
	s := preemptSnap(3)
	s.QOS["mid"] = QOS{Priority: 50}
	s.QOS["high"] = QOS{Priority: 100, Preempt: []string{"low", "mid"}}
	s.Running[0].QOS = "mid" // job 1, the youngest, ranks above the others
	s.Queue = []Job{highGang(10, 1)}
	if got := victims(Schedule(s, pt0)); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("victims %v; want [2], the youngest of the lowest QOS", got)
	}
}

func TestPreemptWholeGangOrNothing(t *testing.T) {
	s := preemptSnap(3)
	s.Running[2].QOS = "high" // one node cannot be freed
	s.Queue = []Job{highGang(10, 3)}
	p := Schedule(s, pt0)
	if len(p.Preemptions) != 0 {
		t.Fatalf("preempted %v for a gang that cannot start whole", victims(p))
	}
	if !slices.Contains(p.Reasons, ReasonChange{JobID: 10, Reason: reason.Resources}) {
		t.Fatalf("reasons %v; want 10 Resources", p.Reasons)
	}
}

func TestPreemptNeverEqualOrHigher(t *testing.T) {
	s := preemptSnap(2)
	s.QOS["high"] = QOS{Priority: 10, Preempt: []string{"low"}} // equal to low's
	s.Queue = []Job{highGang(10, 1)}
	if p := Schedule(s, pt0); len(p.Preemptions) != 0 {
		t.Fatalf("preempted %v of equal priority", victims(p))
	}
	// Not listed: no QOS preemption either.
	s = preemptSnap(2)
	s.QOS["high"] = QOS{Priority: 100}
	s.Queue = []Job{highGang(10, 1)}
	if p := Schedule(s, pt0); len(p.Preemptions) != 0 {
		t.Fatalf("preempted %v of a QOS high does not list", victims(p))
	}
	// Mode off: never.
	s = preemptSnap(2)
	s.Partitions["batch"] = Partition{PreemptMode: PreemptOff}
	s.Queue = []Job{highGang(10, 1)}
	if p := Schedule(s, pt0); len(p.Preemptions) != 0 {
		t.Fatalf("preempted %v in a partition with preempt_mode off", victims(p))
	}
}

func TestPreemptByTier(t *testing.T) {
	s := preemptSnap(2)
	s.Partitions = map[string]Partition{"batch": {PreemptMode: PreemptCancel}, "urgent": {Tier: 10}}
	s.QOS = nil
	for i := range s.Running {
		s.Running[i].QOS = ""
	}
	j := highGang(10, 1)
	j.Partition, j.QOS = "urgent", ""
	s.Queue = []Job{j}
	p := Schedule(s, pt0)
	if got := victims(p); !slices.Equal(got, []uint64{1}) || p.Preemptions[0].Mode != PreemptCancel {
		t.Fatalf("preemptions %+v; want job 1 cancelled for the higher tier", p.Preemptions)
	}
	// The other way round: a lower tier never preempts.
	s.Partitions = map[string]Partition{"batch": {Tier: 10, PreemptMode: PreemptCancel}, "urgent": {}}
	if p := Schedule(s, pt0); len(p.Preemptions) != 0 {
		t.Fatalf("a lower tier preempted %v", victims(p))
	}
}

func TestPreemptExemptAndWindow(t *testing.T) {
	s := preemptSnap(3)
	s.Partitions["batch"] = Partition{PreemptMode: PreemptRequeue, PreemptExempt: 90 * time.Second}
	s.Running[1].Preempted = pt0.Add(-5 * time.Minute) // job 2: preempted inside the window
	s.Queue = []Job{highGang(10, 1)}
	// Job 1 ran 1 min (exempt), job 2 was preempted 5 min ago: job 3.
	if got := victims(Schedule(s, pt0)); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("victims %v; want [3]: 1 is exempt, 2 inside the window", got)
	}
	s.Running[1].Preempted = pt0.Add(-11 * time.Minute)
	if got := victims(Schedule(s, pt0)); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("victims %v; want [2] once its window passed", got)
	}
}

func TestPreemptReservationHeld(t *testing.T) {
	// Node a is half free, b is full with low job 1. A 2-node gang of
	// high preempts 1; a small low job that would fit a's free half may
	// not take it, in this pass nor while 1 stops.
	s := preemptSnap(2)
	s.Running = s.Running[:1]
	s.Nodes[1].Free = Res{CPUMilli: 4000, Memory: 16 * gib}
	s.Nodes[0].Free = Res{}
	s.Running[0].Nodes = []string{"a"}
	s.Nodes = []Node{s.Nodes[0], s.Nodes[1]}
	small := gang(20, ModeSingleNode, 1, 1)
	small.Partition, small.QOS, small.User, small.Submit, small.Walltime = "batch", "low", "w", pt0, time.Hour
	s.Queue = []Job{highGang(10, 2), small}
	p := Schedule(s, pt0)
	if got := victims(p); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("victims %v; want [1]", got)
	}
	if len(p.Placements) != 0 {
		t.Fatalf("placed %+v on what the preemptor holds", p.Placements)
	}
	// Next pass: 1 is stopping; the preemptor keeps its hold and waits
	// Preempting, choosing no one else.
	s.Running[0].StoppingFor = 10
	s.Queue[0].Reason = reason.Preempting
	p = Schedule(s, pt0.Add(time.Second))
	if len(p.Preemptions) != 0 || len(p.Placements) != 0 {
		t.Fatalf("while its victim stops: preemptions %v placements %+v; want none", p.Preemptions, p.Placements)
	}
	// 1 has stopped: the preemptor starts on both nodes.
	s.Running = nil
	s.Nodes[0].Free = s.Nodes[0].Capacity
	p = Schedule(s, pt0.Add(2*time.Second))
	if len(p.Placements) == 0 || p.Placements[0].JobID != 10 {
		t.Fatalf("placements %+v; want 10 first", p.Placements)
	}
}

func TestPreemptNothingWhenFreeEnough(t *testing.T) {
	s := preemptSnap(2)
	s.Nodes = append(s.Nodes, node("z", 4, 16))
	s.Queue = []Job{highGang(10, 1)}
	p := Schedule(s, pt0)
	if len(p.Preemptions) != 0 || len(p.Placements) != 1 {
		t.Fatalf("preemptions %v placements %+v; want it placed on the free node", p.Preemptions, p.Placements)
	}
}

func TestQOSUserLimits(t *testing.T) {
	s := Snapshot{Nodes: []Node{node("a", 8, 16)}, QOS: map[string]QOS{"q": {UserLimits: Limits{Jobs: 1}}}}
	j1, j2 := gang(1, ModeSingleNode, 1, 1), gang(2, ModeSingleNode, 1, 1)
	j1.QOS, j2.QOS, j1.User, j2.User = "q", "q", "u", "u"
	s.Queue = []Job{j1, j2}
	p := Schedule(s, pt0)
	if len(p.Placements) != 1 || !slices.Contains(p.Reasons, ReasonChange{JobID: 2, Reason: reason.AccountLimit}) {
		t.Fatalf("placements %+v reasons %v; want 1 placed, 2 AccountLimit (max_jobs_per_user 1)", p.Placements, p.Reasons)
	}
}

func TestQOSPriority(t *testing.T) {
	s := Snapshot{Nodes: []Node{node("a", 1, 16)}, QOS: map[string]QOS{"hi": {Priority: 5}, "lo": {Priority: 1}},
		Policy: Policy{Weights: Weights{QOS: 1000}}}
	j1, j2 := gang(1, ModeSingleNode, 1, 1), gang(2, ModeSingleNode, 1, 1)
	j1.QOS, j2.QOS = "lo", "hi"
	s.Queue = []Job{j1, j2}
	p := Schedule(s, pt0)
	if len(p.Placements) != 1 || p.Placements[0].JobID != 2 {
		t.Fatalf("placements %+v; want the high-QOS job 2 first", p.Placements)
	}
}

// TestPreemptDepth: at most Policy.PreemptDepth pending jobs choose
// victims in a pass, the first in priority order; the next pass, with
// their victims stopping, lets the next one choose.
func TestPreemptDepth(t *testing.T) {
	s := preemptSnap(4)
	s.Policy.PreemptDepth = 1
	a, b := highGang(10, 2), highGang(11, 2)
	b.Submit = pt0.Add(time.Minute) // a ranks first (older)
	s.Queue = []Job{a, b}
	p := Schedule(s, pt0)
	by := map[uint64]int{}
	for _, pr := range p.Preemptions {
		by[pr.By]++
	}
	if by[10] != 2 || by[11] != 0 {
		t.Fatalf("preemptions by job %v; want job 10 alone (2 victims) with a depth of 1", by)
	}
	// Next pass: 10's victims are stopping for it; 11 chooses its own.
	stopping := map[uint64]uint64{}
	for _, pr := range p.Preemptions {
		stopping[pr.Victim] = pr.By
	}
	for i := range s.Running {
		s.Running[i].StoppingFor = stopping[s.Running[i].JobID]
	}
	for i := range s.Queue {
		if s.Queue[i].ID == 10 {
			s.Queue[i].Reason = reason.Preempting
		}
	}
	p = Schedule(s, pt0.Add(time.Second))
	by = map[uint64]int{}
	for _, pr := range p.Preemptions {
		if stopping[pr.Victim] != 0 {
			t.Fatalf("job %d preempted again while it stops for %d", pr.Victim, stopping[pr.Victim])
		}
		by[pr.By]++
	}
	if by[11] != 2 {
		t.Fatalf("second pass: preemptions by job %v; want job 11's two victims", by)
	}

	s.Policy.PreemptDepth = 0 // no bound: both choose in one pass
	for i := range s.Running {
		s.Running[i].StoppingFor = 0
	}
	s.Queue[0].Reason = ""
	if p := Schedule(s, pt0); len(p.Preemptions) != 4 {
		t.Fatalf("unbounded: %d preemptions, want both gangs' 4", len(p.Preemptions))
	}
}
