package core

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Property tests in the manner of etcd raft's quorum/quick_test.go: the
// fast code against a plain reference.

func genNodes(t *rapid.T, withDevices bool) []Node {
	n := rapid.IntRange(1, 12).Draw(t, "nodes")
	nodes := make([]Node, n)
	for i := range nodes {
		capc := Res{CPUMilli: int64(rapid.IntRange(1, 16).Draw(t, "cpu")) * 1000, Memory: int64(rapid.IntRange(1, 32).Draw(t, "mem")) * gib}
		free := Res{CPUMilli: int64(rapid.IntRange(0, int(capc.CPUMilli/1000)).Draw(t, "fcpu")) * 1000,
			Memory: int64(rapid.IntRange(0, int(capc.Memory/gib)).Draw(t, "fmem")) * gib}
		nd := Node{Name: fmt.Sprintf("n%02d", i), Capacity: capc, Free: free}
		if withDevices && rapid.Bool().Draw(t, "gpu") {
			k := rapid.IntRange(1, 4).Draw(t, "devs")
			for d := 0; d < k; d++ {
				f := float64(rapid.IntRange(0, 4).Draw(t, "share")) / 4
				nd.Devices = append(nd.Devices, Device{ID: d, Free: f})
				nd.Free.GPU += f
			}
			nd.Capacity.GPU = float64(k)
		}
		nodes[i] = nd
	}
	return nodes
}

func genJob(t *rapid.T, id uint64, withGPU bool) Job {
	n := rapid.IntRange(1, 6).Draw(t, "containers")
	uniform := rapid.Bool().Draw(t, "uniform")
	j := Job{ID: id, Mode: rapid.SampledFrom([]string{ModeSingleNode, ModeMultiNode}).Draw(t, "mode")}
	var first Res
	for i := 0; i < n; i++ {
		r := Res{CPUMilli: int64(rapid.IntRange(0, 4).Draw(t, "ccpu")) * 1000, Memory: int64(rapid.IntRange(0, 4).Draw(t, "cmem")) * gib}
		if withGPU && rapid.IntRange(0, 2).Draw(t, "g") == 0 {
			r.GPU = rapid.SampledFrom([]float64{0.25, 0.5, 1, 2}).Draw(t, "cgpu")
		}
		if i == 0 {
			first = r
		} else if uniform {
			r = first
		}
		j.Containers = append(j.Containers, r)
	}
	return j
}

// TestPlacerMatchesReference: the indexed placer and refPlace agree.
func TestPlacerMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := genNodes(t, true)
		c := newCluster(nodes)
		for k := 0; k < 5; k++ {
			j := genJob(t, uint64(k+1), true)
			p := placer{c: c, quantum: 0.25}
			got, ok := p.place("", &j)
			want, wok := refPlace(c.nodes, "", &j, 0.25, nil)
			if ok != wok || (ok && !reflect.DeepEqual(got, want)) {
				t.Fatalf("job %+v: placer %v %+v, reference %v %+v", j, ok, got, wok, want)
			}
			if ok {
				c.commit(&j, got, 0.25)
			}
		}
	})
}

// TestPriorityOrderMatchesSort: the radix order equals a stable sort by
// priority.
func TestPriorityOrderMatchesSort(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 200).Draw(t, "n")
		now := time.Unix(1e6, 0)
		q := make([]Job, n)
		for i := range q {
			q[i] = Job{ID: uint64(i + 1), Containers: []Res{{CPUMilli: 1000}},
				Submit:    now.Add(-time.Duration(rapid.IntRange(-10, 1000).Draw(t, "age")) * time.Minute),
				FairShare: float64(rapid.IntRange(0, 4).Draw(t, "fs")) / 4, Nice: float64(rapid.IntRange(-1, 2).Draw(t, "nice"))}
			if rapid.IntRange(0, 9).Draw(t, "inel") == 0 {
				q[i].Held = true
			}
		}
		s := Snapshot{Nodes: []Node{node("a", 8, 8)}, Queue: q, Policy: DefaultPolicy()}
		p := newPrio(&s, 8000)
		got := p.order(q, eligible(&s, nil), now)
		var want []int32
		for i := range q {
			if !q[i].Held {
				want = append(want, int32(i))
			}
		}
		sort.SliceStable(want, func(a, b int) bool {
			return p.factors(&q[want[a]], now).Priority > p.factors(&q[want[b]], now).Priority
		})
		if !reflect.DeepEqual(got, want) && len(want) > 0 {
			t.Fatalf("order %v, want %v", got, want)
		}
	})
}

// TestBackfillNeverDelaysReservation: whatever a pass starts now, every
// reserved job still fits its nodes at its estimated start, assuming each
// job runs its full walltime and the reservations before it hold theirs.
func TestBackfillNeverDelaysReservation(t *testing.T) {
	backfilled, reserved := 0, 0
	defer func() {
		t.Logf("%d reservations, %d backfilled jobs", reserved, backfilled)
		if backfilled == 0 || reserved == 0 {
			t.Error("the generator made no backfill")
		}
	}()
	rapid.Check(t, func(t *rapid.T) {
		now := time.Unix(1e6, 0)
		nodes := genNodes(t, false)
		for i := range nodes {
			nodes[i].Free = nodes[i].Capacity
		}
		// Running jobs fill part of the nodes.
		var running []Running
		for i := range nodes {
			n := &nodes[i]
			k := rapid.IntRange(0, 3).Draw(t, "running")
			for r := 0; r < k; r++ {
				use := Res{CPUMilli: int64(rapid.IntRange(1, 4).Draw(t, "rcpu")) * 1000, Memory: gib}
				if !n.Free.Covers(use) {
					break
				}
				n.Free = n.Free.Sub(use)
				running = append(running, Running{JobID: uint64(1000 + len(running)), Start: now.Add(-time.Minute),
					Walltime: time.Duration(rapid.IntRange(1, 120).Draw(t, "rwall")) * time.Minute,
					Nodes:    []string{n.Name}, Containers: []Res{use}})
			}
		}
		var q []Job
		for k := 0; k < rapid.IntRange(1, 15).Draw(t, "queue"); k++ {
			j := genJob(t, uint64(k+1), false)
			j.Walltime = time.Duration(rapid.IntRange(1, 180).Draw(t, "wall")) * time.Minute
			q = append(q, j)
		}
		s := Snapshot{Nodes: nodes, Queue: q, Running: running,
			Policy: Policy{ReservationDepth: rapid.IntRange(1, 3).Draw(t, "depth")}}
		plan := Schedule(s, now)
		for _, p := range plan.Placements {
			if p.Backfilled {
				backfilled++
			}
		}
		reserved += len(plan.Starts)
		checkReservations(t, s, plan, now)
	})
}

type interval struct {
	start, end time.Time
	nodes      []string
	cs         []Res
}

func checkReservations(t *rapid.T, s Snapshot, plan Plan, now time.Time) {
	byID := map[uint64]*Job{}
	for i := range s.Queue {
		byID[s.Queue[i].ID] = &s.Queue[i]
	}
	var all []interval
	for _, r := range s.Running {
		all = append(all, interval{r.Start, r.Start.Add(r.Walltime), r.Nodes, r.Containers})
	}
	for _, p := range plan.Placements {
		j := byID[p.JobID]
		all = append(all, interval{now, now.Add(j.Walltime), p.Nodes, j.Containers})
	}
	for _, st := range plan.Starts {
		j := byID[st.JobID]
		all = append(all, interval{st.Start, st.Start.Add(j.Walltime), st.Nodes, j.Containers})
	}
	capByName := map[string]Res{}
	for _, n := range s.Nodes {
		capByName[n.Name] = n.Capacity
	}
	for _, st := range plan.Starts {
		used := map[string]Res{}
		for _, iv := range all {
			if !iv.start.After(st.Start) && iv.end.After(st.Start) {
				for k, n := range iv.nodes {
					used[n] = used[n].Add(iv.cs[k])
				}
			}
		}
		for n, u := range used {
			if !capByName[n].Covers(u) {
				t.Fatalf("at job %d's reserved start %v node %s needs %+v of %+v\nplan %+v", st.JobID, st.Start.Sub(now), n, u, capByName[n], plan)
			}
		}
	}
}
