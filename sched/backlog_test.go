package sched

import (
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/partition"
	"github.com/troupe-hpc/troupe/sched/state"
)

// backlogConfigs are the partitions files the property test switches
// between: a queue depth small enough to bound its passes, a starvation
// threshold, tiers, and partition limits that the second tightens.
var backlogConfigs = []string{`
queue_depth = 3
partition "a" {
  nodes                = ["n[1-2]"]
  max_walltime         = "3h"
  starvation_threshold = "1h"
  priority_tier        = 2
}
partition "b" {
  nodes = ["n[2-3]"]
}
`, `
queue_depth = 2
partition "a" {
  nodes                = ["n[1-2]"]
  max_walltime         = "1h"
  starvation_threshold = "30m"
}
partition "b" {
  nodes         = ["n[2-3]"]
  priority_tier = 1
}
`}

// TestBacklogFollowsTheState drives a state through random changes
// (submissions in batches, some held, some with a dependency or a
// reservation; holds, releases, kills, ends, the clock moving past the
// starvation threshold, a new config, a restore) and after each checks
// that the backlog the leader keeps from the change feed:
//
//   - holds what one built afresh from the state holds;
//   - gives the core, under a queue depth of 2-3, the jobs that make
//     its plan the very plan it makes with every waiting job;
//   - answers each waiting job's priority and queue position as the
//     ranking of the whole queue does.
func TestBacklogFollowsTheState(t *testing.T) {
	for seed := int64(1); seed <= 16; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { backlogProperty(t, seed, 120) })
	}
}

func backlogProperty(t *testing.T, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	cfgs := make([]*partition.Config, len(backlogConfigs))
	for i, src := range backlogConfigs {
		c, diags := partition.Parse("partitions.hcl", []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		cfgs[i] = c
	}
	st := state.New()
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	clock := t0
	idx := uint64(0)
	apply := func(act state.Act) any {
		t.Helper()
		idx++
		clock = clock.Add(time.Second)
		res, err := st.Apply(idx, state.Command{Version: state.SchemaVersion, Time: clock, Act: act})
		if err != nil {
			t.Fatalf("%T: %v", act, err)
		}
		return res
	}
	apply(state.Configure{Config: cfgs[0]})
	for _, n := range []string{"n1", "n2", "n3"} {
		apply(state.Register{Node: &state.Node{Name: n, Addr: "10.0.0.1", Capacity: state.Resources{CPUMilli: 4000, Memory: 16 << 30}}})
	}
	users := []string{"ada", "bob", "eve"}
	in := func(states ...api.JobState) []*state.Job {
		var out []*state.Job
		for _, j := range st.Snapshot().LiveJobs() {
			if slices.Contains(states, j.State) && j.Array == nil {
				out = append(out, j)
			}
		}
		return out
	}
	any1 := func(js []*state.Job) *state.Job {
		if len(js) == 0 {
			return nil
		}
		return js[rng.Intn(len(js))]
	}
	var bl backlog
	trimmed := 0 // passes whose queue the depth bounded
	for step := range steps {
		switch r := rng.Intn(100); {
		case r < 40:
			var jobs []*state.Job
			for range 1 + rng.Intn(4) {
				j := &state.Job{Name: "p", User: users[rng.Intn(len(users))], UID: 1000, Partition: []string{"a", "b"}[rng.Intn(2)],
					State: api.JobPending, Walltime: []time.Duration{0, 30 * time.Minute, 2 * time.Hour, 4 * time.Hour}[rng.Intn(4)]}
				for k := range 1 + rng.Intn(2) {
					c := rowContainer(jobspec.Container{Host: fmt.Sprint("main", k+1), Role: jobspec.RoleMain, Idx: k + 1,
						Resources: jobspec.Resources{CPU: float64(1 + rng.Intn(4)), Memory: 1 << 30}})
					c.KernelID = "k"
					j.Containers = append(j.Containers, c)
				}
				j.Spec.Cluster.Mode = jobspec.ModeMultiNode
				j.Spec.Priority = -rng.Intn(2) * 3
				switch rng.Intn(12) {
				case 0:
					j.State = api.JobHeld
				case 1:
					if o := any1(in(api.JobPending, api.JobRunning, api.JobScheduled)); o != nil {
						j.DependsOn = &state.Dependency{Conditions: []state.Condition{{Kind: "done", JobID: o.ID}}}
					}
				case 2:
					j.Reservation = "maintenance"
				}
				jobs = append(jobs, j)
			}
			apply(state.Submit{Jobs: jobs})
		case r < 48:
			if j := any1(in(api.JobPending)); j != nil {
				apply(state.Hold{Job: state.JobRef{ID: j.ID}})
			}
		case r < 56:
			if j := any1(in(api.JobHeld)); j != nil {
				apply(state.Release{Job: state.JobRef{ID: j.ID}})
			}
		case r < 62:
			if j := any1(in(api.JobPending, api.JobHeld, api.JobScheduled)); j != nil {
				apply(state.Kill{Job: state.JobRef{ID: j.ID}})
			}
		case r < 78:
			if j := any1(in(api.JobScheduled)); j != nil {
				rep := state.Report{Node: j.Containers[0].Node}
				for _, c := range j.Containers {
					rep.Updates = append(rep.Updates, state.ContainerUpdate{JobID: j.ID, Host: c.Host, State: api.ContainerExited})
				}
				apply(state.Reports{Reports: []state.Report{rep}})
			}
		case r < 90:
			clock = clock.Add(time.Duration(10+rng.Intn(80)) * time.Minute)
		case r < 95:
			apply(state.Configure{Config: cfgs[rng.Intn(len(cfgs))]})
		default:
			if err := st.Restore(st.Snapshot().Dump()); err != nil {
				t.Fatal(err)
			}
		}
		now := clock
		v, changes, whole := st.SnapshotChanges()
		bl.update(v, changes, whole)
		var fresh backlog
		fresh.update(v, nil, true)
		nodes := partitionedNodes(v, v.Config())
		inc := bl.snapshot(v, nodes, now)
		_ = fresh.snapshot(v, nodes, now)
		if got, want := bl.describe(), fresh.describe(); got != want {
			t.Fatalf("step %d: the backlog kept from the changes\n%s\nis not the one built afresh\n%s", step, got, want)
		}
		all := coreSnapshot(v, nodes, now)
		if len(inc.Queue) > len(all.Queue) {
			t.Fatalf("step %d: the backlog gave the core %d jobs of %d", step, len(inc.Queue), len(all.Queue))
		}
		if len(inc.Queue) < len(all.Queue) {
			trimmed++
		}
		want := core.Schedule(all, now)
		got := core.Schedule(inc, now)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: the plan with the backlog's %d jobs\n%+v\nis not the plan with all %d\n%+v", step, len(inc.Queue), got, len(all.Queue), want)
		}
		if !got.Empty() {
			apply(state.Place{Plan: fromCore(got)})
			v, changes, whole = st.SnapshotChanges()
			bl.update(v, changes, whole)
		}
		ref := wholeRanks(coreSnapshot(v, nodes, now), now)
		for _, j := range v.LiveJobs() {
			r, ok := bl.rank(j)
			w, wok := ref[j.ID]
			if ok != wok || ok && (r.pos != w.pos || r.len != w.len || r.factors != w.factors) {
				t.Fatalf("step %d: job %d (%s, %s, %q) ranked %+v (%v), want %+v (%v)", step, j.ID, j.State, j.Partition, j.Reason, r, ok, w, wok)
			}
		}
	}
	if trimmed == 0 {
		t.Fatal("no pass gave the core fewer jobs than the whole queue: the depth bound was not exercised")
	}
}

// describe is what b holds, in words, for comparing two backlogs.
func (b *backlog) describe() string {
	var sb strings.Builder
	keys := slices.Collect(maps.Keys(b.groups))
	sort.Slice(keys, func(i, k int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[k]) })
	for _, k := range keys {
		var ids []uint64
		for _, s := range b.groups[k].slots {
			if s.j != nil {
				ids = append(ids, s.id)
			}
		}
		fmt.Fprintf(&sb, "group %+v: %v\n", k, ids)
	}
	for _, set := range []struct {
		name string
		m    map[uint64]*state.Job
	}{{"held", b.held}, {"deps", b.deps}, {"resv", b.resv}, {"limited", b.limited}, {"arrays", b.arrays}, {"kept", b.kept}, {"breach", b.breach}} {
		fmt.Fprintf(&sb, "%s: %v\n", set.name, slices.Sorted(maps.Keys(set.m)))
	}
	fmt.Fprintf(&sb, "users: %v\n", b.users)
	return sb.String()
}

// wholeRanks is every waiting job's priority and queue position worked
// out from the whole queue: the eligible jobs in the order the core
// considers them, then those the eligible stage keeps out, by priority
// (ties in queue order); held jobs have none.
func wholeRanks(snap core.Snapshot, now time.Time) map[uint64]rank {
	factors, order := core.Ranking(snap, now)
	w := snap.Policy.Weights
	ranked := make([]bool, len(snap.Queue))
	for _, i := range order {
		ranked[i] = true
	}
	seq := make([]int, 0, len(snap.Queue))
	for _, i := range order {
		seq = append(seq, int(i))
	}
	var rest []int
	for i := range snap.Queue {
		if !ranked[i] && !snap.Queue[i].Held {
			rest = append(rest, i)
		}
	}
	sort.SliceStable(rest, func(a, b int) bool { return factors[rest[a]].Priority > factors[rest[b]].Priority })
	seq = append(seq, rest...)
	out := map[uint64]rank{}
	count := map[string]int{}
	for _, i := range seq {
		j := &snap.Queue[i]
		count[j.Partition]++
		f := factors[i]
		out[j.ID] = rank{pos: count[j.Partition], factors: api.PriorityFactors{
			Age: w.Age * f.Age, FairShare: w.FairShare * f.FairShare, JobSize: w.JobSize * f.JobSize,
			Partition: w.Partition * f.Partition, Nice: -f.Nice, Total: f.Priority,
		}}
	}
	for i := range snap.Queue {
		j := &snap.Queue[i]
		if r, ok := out[j.ID]; ok {
			r.len = count[j.Partition]
			out[j.ID] = r
		}
	}
	return out
}
