package sim

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/depend"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sim/swf"
)

func after(kind depend.Kind, ids ...uint64) *core.Dependency {
	d := &core.Dependency{}
	for _, id := range ids {
		d.Conditions = append(d.Conditions, core.Condition{Kind: kind, Job: core.JobRef{ID: id}})
	}
	return d
}

// TestDependency: on 4 processors, job 2 waits for job 1 to end
// (ended(1)) though there is room for both; waiting on its dependency it
// blocks nobody, even under FCFS, so job 3 takes the room at once.
// Without the dependency job 2 starts on arrival and job 3 waits for it
// to end. started(1) is met as job 1 starts.
func TestDependency(t *testing.T) {
	js := func(d *core.Dependency) []Job {
		return []Job{
			{ID: 1, User: "a", Submit: 0, Run: 100, Estimate: 100, Procs: 2},
			{ID: 2, User: "a", Submit: 0, Run: 50, Estimate: 50, Procs: 2, Depends: d},
			{ID: 3, User: "b", Submit: 1, Run: 50, Estimate: 50, Procs: 2},
		}
	}
	for _, policy := range []string{"fcfs", "easy", "default"} {
		pol, fair, _ := Policy(policy)
		for _, tt := range []struct {
			name string
			dep  *core.Dependency
			want map[uint64]int64
		}{
			{"none", nil, map[uint64]int64{1: 0, 2: 0, 3: 50}},
			{"ended(1)", after(depend.Ended, 1), map[uint64]int64{1: 0, 2: 100, 3: 1}},
			{"done(1)", after(depend.Done, 1), map[uint64]int64{1: 0, 2: 100, 3: 1}},
			{"started(1)", after(depend.Started, 1), map[uint64]int64{1: 0, 2: 0, 3: 50}},
		} {
			r, err := Run(js(tt.dep), Options{Procs: 4, Policy: pol, FairShare: fair}, time.Now)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(r.Starts, tt.want) {
				t.Errorf("%s, %s: starts %v, want %v", policy, tt.name, r.Starts, tt.want)
			}
		}
	}
}

// TestHold: job 1, submitted held and released at 500, lets job 2
// (submitted at 10, wide enough to need the whole machine) run first;
// released, it starts when job 2 ends. Unheld, it starts at 0 and job 2
// waits for it.
func TestHold(t *testing.T) {
	for _, tt := range []struct {
		hold int64
		want map[uint64]int64
	}{
		{0, map[uint64]int64{1: 0, 2: 100}},
		{500, map[uint64]int64{1: 500, 2: 10}},
		{20, map[uint64]int64{1: 110, 2: 10}}, // released while job 2 runs
	} {
		js := []Job{
			{ID: 1, User: "a", Submit: 0, Run: 100, Estimate: 100, Procs: 3, Hold: tt.hold},
			{ID: 2, User: "b", Submit: 10, Run: 100, Estimate: 100, Procs: 4},
		}
		pol, _, _ := Policy("easy")
		r, err := Run(js, Options{Procs: 4, Policy: pol}, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(r.Starts, tt.want) {
			t.Errorf("hold %ds: starts %v, want %v", tt.hold, r.Starts, tt.want)
		}
	}
}

// TestDependencyRefused: a dependency schedd would refuse at submission
// (a job not in the workload, one submitted later, an array element) and
// one that can never be met are errors naming the job.
func TestDependencyRefused(t *testing.T) {
	pol, _, _ := Policy("easy")
	for _, tt := range []struct {
		name string
		dep  *core.Dependency
		want string
	}{
		{"missing", after(depend.Done, 9), "job 2: dependency on job 9, which is not in the workload"},
		{"later", after(depend.Done, 3), "job 2: dependency on job 3, submitted after it"},
		{"element", &core.Dependency{Conditions: []core.Condition{{Kind: depend.Done, Job: core.JobRef{ID: 1, Index: 2, Element: true}}}}, "no job arrays"},
		{"empty", &core.Dependency{}, "job 2: dependency without conditions"},
		{"never", after(depend.Exit, 1), "job 2 never started (DependencyNeverSatisfied)"},
	} {
		js := []Job{
			{ID: 1, User: "a", Submit: 0, Run: 10, Estimate: 10, Procs: 1},
			{ID: 2, User: "a", Submit: 1, Run: 10, Estimate: 10, Procs: 1, Depends: tt.dep},
			{ID: 3, User: "a", Submit: 2, Run: 10, Estimate: 10, Procs: 1},
		}
		_, err := Run(js, Options{Procs: 4, Policy: pol}, time.Now)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestPreceding: SWF's preceding job (field 17) becomes ended(N) when N
// is in the workload; a record naming itself, none (-1) or a dropped job
// gets no dependency.
func TestPreceding(t *testing.T) {
	recs := []swf.Job{
		{ID: 1, Run: 10, Procs: 1, Preceding: -1},
		{ID: 2, Run: 10, Procs: 1, Preceding: 1},
		{ID: 3, Run: 10, Procs: 1, Preceding: 3},
		{ID: 4, Run: -1, Procs: 1, Preceding: -1}, // dropped: no runtime
		{ID: 5, Run: 10, Procs: 1, Preceding: 4},
	}
	js, _ := FromSWF(recs, 8)
	if n := Preceding(recs, js); n != 1 {
		t.Fatalf("%d jobs got a dependency, want 1", n)
	}
	for _, j := range js {
		if (j.Depends != nil) != (j.ID == 2) {
			t.Errorf("job %d: dependency %+v", j.ID, j.Depends)
		}
	}
	if c := js[1].Depends.Conditions; len(c) != 1 || c[0] != (core.Condition{Kind: depend.Ended, Job: core.JobRef{ID: 1}}) {
		t.Fatalf("job 2's dependency %+v, want ended(1)", c)
	}
}

// TestArrivals: submissions and releases by time; at equal times
// submissions first.
func TestArrivals(t *testing.T) {
	js := []Job{{ID: 1, Submit: 0, Hold: 10}, {ID: 2, Submit: 5, Hold: 5}, {ID: 3, Submit: 10}}
	var got []string
	for _, a := range Arrivals(js) {
		s := "submit"
		if a.Release {
			s = "release"
		}
		got = append(got, s+" "+string(rune('0'+a.Job.ID))+" @"+string(rune('0'+a.At/5)))
	}
	want := "submit 1 @0,submit 2 @1,submit 3 @2,release 1 @2,release 2 @2"
	if g := strings.Join(got, ","); g != want {
		t.Fatalf("arrivals %s, want %s", g, want)
	}
}
