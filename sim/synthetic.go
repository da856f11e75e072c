package sim

import (
	"fmt"
	"time"

	"github.com/troupe-hpc/troupe/sched/core"
)

// Synthetic workloads for the speed targets (docs/scale.md, "Targets"): the
// same ones the core's benchmarks run.

// SyntheticNodes is n empty nodes of 64 CPUs and 256 GiB.
func SyntheticNodes(n int) []core.Node {
	nodes := make([]core.Node, n)
	r := core.Res{CPUMilli: 64000, Memory: 256 << 30}
	for i := range nodes {
		nodes[i] = core.Node{Name: fmt.Sprintf("node%05d", i), Capacity: r, Free: r}
	}
	return nodes
}

// SyntheticQueue is n pending jobs submitted a second apart, deterministic
// (a fixed linear congruential sequence). gangs selects multi-node gangs
// of 8–64 containers of 1 CPU and 2 GiB; otherwise 1-container jobs of 1–4
// CPUs and 1–8 GiB.
func SyntheticQueue(n int, gangs bool) []core.Job {
	q := make([]core.Job, n)
	x := uint64(88172645463325252)
	rnd := func(k int) int {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(k))
	}
	base := time.Unix(1_700_000_000, 0)
	for i := range q {
		j := core.Job{ID: uint64(i + 1), Mode: core.ModeSingleNode, User: fmt.Sprintf("u%d", rnd(50)),
			Submit: base.Add(time.Duration(i) * time.Second), Walltime: time.Duration(1+rnd(24)) * time.Hour,
			FairShare: float64(rnd(1000)) / 1000}
		if gangs {
			j.Mode = core.ModeMultiNode
			n := 8 + rnd(57)
			j.Containers = make([]core.Res, n)
			for k := range j.Containers {
				j.Containers[k] = core.Res{CPUMilli: 1000, Memory: 2 << 30}
			}
		} else {
			j.Containers = []core.Res{{CPUMilli: int64(1+rnd(4)) * 1000, Memory: int64(1+rnd(8)) << 30}}
		}
		q[i] = j
	}
	return q
}

// BusySnapshot is a steady-state pass: every node runs a job that leaves
// 0–3 CPUs free (ending within 24 h), jobs pending, the default policy
// (fair share, EASY backfill).
func BusySnapshot(nodes, jobs int) core.Snapshot {
	s := core.Snapshot{Nodes: SyntheticNodes(nodes), Queue: SyntheticQueue(jobs, false), Policy: core.DefaultPolicy()}
	now := s.Queue[len(s.Queue)-1].Submit
	for i := range s.Nodes {
		n := &s.Nodes[i]
		left := int64(i%4) * 1000
		r := core.Res{CPUMilli: n.Capacity.CPUMilli - left, Memory: n.Capacity.Memory / 2}
		n.Free = n.Capacity.Sub(r)
		s.Running = append(s.Running, core.Running{JobID: uint64(10_000_000 + i), Start: now.Add(-time.Hour),
			Walltime: time.Duration(2+i%23) * time.Hour, Nodes: []string{n.Name}, Containers: []core.Res{r}})
	}
	return s
}

// SettleReasons records in s the pending reasons a pass over s gives, as
// schedd's loop does between passes.
func SettleReasons(s *core.Snapshot) {
	now := s.Queue[len(s.Queue)-1].Submit
	p := core.Schedule(*s, now)
	pos := make(map[uint64]int, len(s.Queue))
	for i := range s.Queue {
		pos[s.Queue[i].ID] = i
	}
	for _, r := range p.Reasons {
		s.Queue[pos[r.JobID]].Reason = r.Reason
	}
}

// SyntheticResult is what bsim --synthetic prints.
type SyntheticResult struct {
	Kind       string  `json:"kind"`
	Nodes      int     `json:"nodes"`
	Queued     int     `json:"queued"`
	Placed     int     `json:"placed"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"per_second"`
	PassMillis float64 `json:"pass_ms,omitempty"`
}

// RunSynthetic runs one scheduling pass over a synthetic cluster:
// "place" (1-container jobs: placements/s), "gang" (gangs of 8–64:
// gangs/s) or "pass" (the whole pass with the default policy on a cluster
// that fills up: its time).
func RunSynthetic(kind string, nodes, jobs int, wall func() time.Time) (SyntheticResult, error) {
	s := core.Snapshot{Nodes: SyntheticNodes(nodes)}
	switch kind {
	case "place":
		s.Queue = SyntheticQueue(jobs, false)
	case "gang":
		s.Queue = SyntheticQueue(jobs, true)
	case "pass":
		s = BusySnapshot(nodes, jobs)
		SettleReasons(&s)
	default:
		return SyntheticResult{}, fmt.Errorf("synthetic %q: want place, gang or pass", kind)
	}
	now := s.Queue[len(s.Queue)-1].Submit
	t0 := wall()
	p := core.Schedule(s, now)
	d := wall().Sub(t0).Seconds()
	r := SyntheticResult{Kind: kind, Nodes: nodes, Queued: jobs, Placed: len(p.Placements), Seconds: d}
	if d > 0 {
		r.PerSecond = float64(r.Placed) / d
	}
	r.PassMillis = d * 1000
	return r, nil
}
