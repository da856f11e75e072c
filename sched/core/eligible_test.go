package core

import (
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/troupe-hpc/troupe/internal/depend"
	"github.com/troupe-hpc/troupe/internal/reason"
)

// TestDependencyStatus: all of the conditions (&&) or any of them (||),
// and a named job missing from Snapshot.Named counts as gone.
func TestDependencyStatus(t *testing.T) {
	ref := func(id uint64) JobRef { return JobRef{ID: id} }
	named := map[JobRef]JobStatus{
		ref(1):                           {Started: true, Ended: true, Completed: true}, // completed
		ref(2):                           {Started: true},                               // running
		ref(3):                           {Started: true, Ended: true},                  // failed
		{ID: 4, Index: 2, Element: true}: {Started: true, Ended: true, Completed: true},
		{ID: 4, Index: 3, Element: true}: {},
		{ID: 4}:                          {Started: true},
	}
	done := func(r JobRef) Condition { return Condition{Kind: depend.Done, Job: r} }
	for _, tt := range []struct {
		name string
		d    Dependency
		want depend.Status
		why  string
	}{
		{"done(1)", Dependency{Conditions: []Condition{done(ref(1))}}, depend.Satisfied, ""},
		{"done(1) && done(2)", Dependency{Conditions: []Condition{done(ref(1)), done(ref(2))}}, depend.Waiting, reason.Dependency},
		{"done(2) && done(3)", Dependency{Conditions: []Condition{done(ref(2)), done(ref(3))}}, depend.Never, reason.DependencyNeverSatisfied},
		{"done(3) || done(2)", Dependency{Any: true, Conditions: []Condition{done(ref(3)), done(ref(2))}}, depend.Waiting, reason.Dependency},
		{"done(3) || done(1)", Dependency{Any: true, Conditions: []Condition{done(ref(3)), done(ref(1))}}, depend.Satisfied, ""},
		{"done(3) || done(9)", Dependency{Any: true, Conditions: []Condition{done(ref(3)), done(ref(9))}}, depend.Never, reason.DependencyNeverSatisfied},
		{"done(9) (gone)", Dependency{Conditions: []Condition{done(ref(9))}}, depend.Never, reason.DependencyNeverSatisfied},
		{"done(4[2])", Dependency{Conditions: []Condition{done(JobRef{ID: 4, Index: 2, Element: true})}}, depend.Satisfied, ""},
		{"done(4[3])", Dependency{Conditions: []Condition{done(JobRef{ID: 4, Index: 3, Element: true})}}, depend.Waiting, reason.Dependency},
		{"done(4)", Dependency{Conditions: []Condition{done(ref(4))}}, depend.Waiting, reason.Dependency},
	} {
		if got := tt.d.Status(named); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
		if got := tt.d.Reason(named); got != tt.why {
			t.Errorf("%s: reason %q, want %q", tt.name, got, tt.why)
		}
	}
	if r := (*Dependency)(nil).Reason(named); r != "" {
		t.Errorf("no dependency: reason %q", r)
	}
}

// TestIneligible: the eligible stage's verdict on one job, first reason
// first (held, then the dependency, then the partition's limits).
func TestIneligible(t *testing.T) {
	waiting := &Dependency{Conditions: []Condition{{Kind: depend.Done, Job: JobRef{ID: 1}}}}
	s := Snapshot{
		Partitions: map[string]Partition{
			"gone":  {Jobs: JobLimits{Closed: true}},
			"short": {Jobs: JobLimits{MaxWalltime: time.Hour}},
			"small": {Jobs: JobLimits{MaxSize: 2}},
			"multi": {Jobs: JobLimits{Modes: []string{ModeMultiNode}}},
			"chem":  {Jobs: JobLimits{Accounts: []string{"chem"}}},
		},
		Named: map[JobRef]JobStatus{{ID: 1}: {Started: true}},
	}
	mk := func(part string, f func(*Job)) Job {
		j := gang(7, ModeSingleNode, 1, 1)
		j.Partition, j.Walltime = part, 30*time.Minute
		if f != nil {
			f(&j)
		}
		return j
	}
	for _, tt := range []struct {
		name string
		j    Job
		want string
	}{
		{"plain", mk("", nil), ""},
		{"held", mk("", func(j *Job) { j.Held = true }), reason.Held},
		{"held before its dependency", mk("gone", func(j *Job) { j.Held, j.Depends = true, waiting }), reason.Held},
		{"dependency waiting", mk("", func(j *Job) { j.Depends = waiting }), reason.Dependency},
		{"dependency before the partition", mk("gone", func(j *Job) { j.Depends = waiting }), reason.Dependency},
		{"dependency on a gone job", mk("", func(j *Job) {
			j.Depends = &Dependency{Conditions: []Condition{{Kind: depend.Ended, Job: JobRef{ID: 99}}}}
		}), reason.DependencyNeverSatisfied},
		{"dependency met", mk("", func(j *Job) {
			j.Depends = &Dependency{Conditions: []Condition{{Kind: depend.Started, Job: JobRef{ID: 1}}}}
		}), ""},
		{"closed partition", mk("gone", nil), reason.PartitionLimit},
		{"walltime within", mk("short", nil), ""},
		{"walltime past", mk("short", func(j *Job) { j.Walltime = 2 * time.Hour }), reason.PartitionLimit},
		{"size within", mk("small", func(j *Job) { j.Containers = append(j.Containers, j.Containers[0]) }), ""},
		{"size past", mk("small", func(j *Job) { j.Containers = append(j.Containers, j.Containers[0], j.Containers[0]) }), reason.PartitionLimit},
		{"mode taken", mk("multi", func(j *Job) { j.Mode = ModeMultiNode }), ""},
		{"mode refused", mk("multi", nil), reason.PartitionLimit},
		{"empty mode is single-node", mk("multi", func(j *Job) { j.Mode = "" }), reason.PartitionLimit},
		{"account above taken", mk("chem", func(j *Job) { j.Accounts = []string{"root", "chem", "chem-lab"} }), ""},
		{"account refused", mk("chem", func(j *Job) { j.Accounts = []string{"root", "phys"} }), reason.PartitionLimit},
	} {
		if got := Ineligible(&s, &tt.j); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestIneligibleBlocksNobody: under strict FIFO (depth 0) a job the
// eligible stage keeps out neither starts nor blocks the jobs behind it,
// nor is it ranked; once the job it depends on completes it starts like
// any other, and a held job's reason is not set again.
func TestIneligibleBlocksNobody(t *testing.T) {
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	s := Snapshot{
		Nodes:      []Node{node("a", 4, 64)},
		Partitions: map[string]Partition{"p": {Jobs: JobLimits{MaxWalltime: time.Hour}}},
		Named:      map[JobRef]JobStatus{{ID: 1}: {Started: true}},
	}
	big := gang(2, ModeSingleNode, 1, 4) // would take the whole node
	big.Depends = &Dependency{Conditions: []Condition{{Kind: depend.Done, Job: JobRef{ID: 1}}}}
	held := gang(3, ModeSingleNode, 1, 4)
	held.Held, held.Reason = true, reason.Held
	long := gang(4, ModeSingleNode, 1, 4)
	long.Partition, long.Walltime = "p", 2*time.Hour
	small := gang(5, ModeSingleNode, 1, 1)
	s.Queue = []Job{big, held, long, small}

	placed, reasons, _ := limitsPlan(s, now)
	if !placed[5] || len(placed) != 1 {
		t.Fatalf("placed %v, want job 5 only", placed)
	}
	want := map[uint64]string{2: reason.Dependency, 4: reason.PartitionLimit}
	for id, r := range want {
		if reasons[id] != r {
			t.Errorf("job %d: reason %q, want %s", id, reasons[id], r)
		}
	}
	if r, ok := reasons[3]; ok {
		t.Errorf("held job 3 already waits Held; the plan sets %q", r)
	}
	if _, order := Ranking(s, now); len(order) != 1 || order[0] != 3 {
		t.Errorf("ranked %v, want only queue index 3 (job 5)", order)
	}

	// Job 1 completes: job 2 is eligible and, first in the queue, starts.
	s.Named[JobRef{ID: 1}] = JobStatus{Started: true, Ended: true, Completed: true}
	if placed, _, _ := limitsPlan(s, now); !placed[2] || placed[5] {
		t.Fatalf("after job 1 completed: placed %v, want job 2 (the node's 4 cpus) and not 5", placed)
	}
	// Job 1 failed instead: job 2 can never start.
	s.Named[JobRef{ID: 1}] = JobStatus{Started: true, Ended: true}
	if _, reasons, _ := limitsPlan(s, now); reasons[2] != reason.DependencyNeverSatisfied {
		t.Fatalf("after job 1 failed: job 2's reason %q, want %s", reasons[2], reason.DependencyNeverSatisfied)
	}
}

// TestIneligibleIsAbsent: a job the eligible stage keeps out (held, a
// dependency waiting or never met, a partition that does not take it)
// changes nothing for the others: the plan's placements and start
// estimates are those of the queue without it, under every policy.
func TestIneligibleIsAbsent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := time.Unix(1e6, 0)
		s := Snapshot{Nodes: genNodes(t, false),
			Partitions: map[string]Partition{"p": {Jobs: JobLimits{MaxSize: 2}}},
			Named:      map[JobRef]JobStatus{{ID: 100}: {}, {ID: 101}: {Started: true, Ended: true}}}
		switch rapid.IntRange(0, 2).Draw(t, "policy") {
		case 1:
			s.Policy = Policy{ReservationDepth: 1}
		case 2:
			s.Policy = DefaultPolicy()
		}
		var kept []Job
		for k := 0; k < rapid.IntRange(1, 12).Draw(t, "queue"); k++ {
			j := genJob(t, uint64(k+1), false)
			j.Walltime = time.Duration(rapid.IntRange(1, 180).Draw(t, "wall")) * time.Minute
			j.Submit = now.Add(-time.Duration(rapid.IntRange(0, 600).Draw(t, "age")) * time.Minute)
			j.FairShare = float64(rapid.IntRange(0, 4).Draw(t, "fs")) / 4
			out := true
			switch rapid.IntRange(0, 5).Draw(t, "eligibility") {
			case 0:
				j.Held = true
			case 1:
				j.Depends = &Dependency{Conditions: []Condition{{Kind: depend.Done, Job: JobRef{ID: 100}}}} // waiting
			case 2:
				j.Depends = &Dependency{Conditions: []Condition{{Kind: depend.Done, Job: JobRef{ID: 101}}}} // never
			case 3:
				j.Partition = "p"
				out = len(j.Containers) > 2
			default:
				out = false
			}
			s.Queue = append(s.Queue, j)
			if !out {
				kept = append(kept, j)
			}
		}
		without := s
		without.Queue = kept
		got, want := Schedule(s, now), Schedule(without, now)
		if !reflect.DeepEqual(got.Placements, want.Placements) || !reflect.DeepEqual(got.Starts, want.Starts) {
			t.Fatalf("with the ineligible jobs: %+v %+v\nwithout: %+v %+v", got.Placements, got.Starts, want.Placements, want.Starts)
		}
	})
}

// TestBreaches: the one partition-limit rule names every bound a job is
// outside (submission words each; the eligible stage needs only "any").
func TestBreaches(t *testing.T) {
	l := JobLimits{MaxWalltime: time.Hour, MaxSize: 2, Modes: []string{ModeMultiNode}, Accounts: []string{"phys"}}
	for _, c := range []struct {
		j    Job
		want Breach
	}{
		{Job{Mode: ModeMultiNode, Containers: make([]Res, 2), Walltime: time.Hour, Accounts: []string{"root", "phys"}}, 0},
		{Job{Containers: make([]Res, 3), Walltime: 2 * time.Hour, Accounts: []string{"chem"}}, BreachAccount | BreachMode | BreachSize | BreachWalltime},
		{Job{Mode: ModeMultiNode, Containers: make([]Res, 1), Accounts: []string{"phys"}}, 0},
	} {
		if got := l.Breaches(&c.j); got != c.want {
			t.Errorf("%+v: breaches %05b, want %05b", c.j, got, c.want)
		}
		if l.takes(&c.j) != (c.want == 0) {
			t.Errorf("%+v: takes disagrees with Breaches", c.j)
		}
	}
	closed := JobLimits{Closed: true}
	if got := closed.Breaches(&Job{}); got != BreachClosed {
		t.Errorf("closed partition: %05b", got)
	}
}
