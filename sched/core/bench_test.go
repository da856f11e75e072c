package core_test

import (
	"testing"

	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sim"
)

// The speed targets (docs/scale.md, "Targets"): 10,000 nodes, 100,000
// queued jobs.
// bsim --synthetic place|gang|pass runs the same passes.

func benchPass(b *testing.B, s core.Snapshot, unit string) {
	now := s.Queue[len(s.Queue)-1].Submit
	b.ResetTimer()
	placed := 0
	for i := 0; i < b.N; i++ {
		placed += len(core.Schedule(s, now).Placements)
	}
	if unit != "" {
		b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), unit)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/pass")
}

// BenchmarkPlacements: 1-container jobs, all placed (target ≥ 20,000/s).
func BenchmarkPlacements(b *testing.B) {
	benchPass(b, core.Snapshot{Nodes: sim.SyntheticNodes(10000), Queue: sim.SyntheticQueue(100000, false)}, "placements/s")
}

// BenchmarkGangs: multi-node gangs of 8–64 containers until the cluster
// is full (target ≥ 5,000 gangs/s).
func BenchmarkGangs(b *testing.B) {
	benchPass(b, core.Snapshot{Nodes: sim.SyntheticNodes(10000), Queue: sim.SyntheticQueue(100000, true)}, "gangs/s")
}

// BenchmarkGangsEASY: the same under the default policy with backfill.
func BenchmarkGangsEASY(b *testing.B) {
	benchPass(b, core.Snapshot{Nodes: sim.SyntheticNodes(10000), Queue: sim.SyntheticQueue(100000, true), Policy: core.DefaultPolicy()}, "gangs/s")
}

// BenchmarkPassSteady: the same pass once the reasons of the previous
// pass are recorded, as in schedd's loop.
func BenchmarkPassSteady(b *testing.B) {
	s := sim.BusySnapshot(10000, 100000)
	sim.SettleReasons(&s)
	benchPass(b, s, "")
}

// BenchmarkPass: one pass over a busy cluster with 100,000 pending under
// the default policy (target ≤ 50 ms).
func BenchmarkPass(b *testing.B) {
	benchPass(b, sim.BusySnapshot(10000, 100000), "")
}

// preemptible is s with preemption on: the running jobs are of QOS low,
// whose partition requeues them, and every tenth queued job is of QOS
// high, which preempts low. The target: a pass at least 80% as fast as
// the same without preemption (BenchmarkPass, BenchmarkPassSteady).
func preemptible(s core.Snapshot) core.Snapshot { return preemptEvery(s, 10) }

// preemptEvery is preemptible with every k-th queued job of QOS high.
func preemptEvery(s core.Snapshot, k int) core.Snapshot {
	s.Partitions = map[string]core.Partition{"": {PreemptMode: core.PreemptRequeue}}
	s.QOS = map[string]core.QOS{"high": {Priority: 10, Preempt: []string{"low"}}, "low": {Priority: 1}}
	for i := range s.Running {
		s.Running[i].QOS = "low"
	}
	for i := range s.Queue {
		if i%k == 0 {
			s.Queue[i].QOS = "high"
		} else {
			s.Queue[i].QOS = "low"
		}
	}
	return s
}

// BenchmarkPassPreempt: BenchmarkPass with preemption on.
func BenchmarkPassPreempt(b *testing.B) {
	benchPass(b, preemptible(sim.BusySnapshot(10000, 100000)), "")
}

// BenchmarkPassPreemptFew: BenchmarkPass with preemption on and one
// queued job in a hundred of QOS high.
func BenchmarkPassPreemptFew(b *testing.B) {
	benchPass(b, preemptEvery(sim.BusySnapshot(10000, 100000), 100), "")
}

// BenchmarkPassSteadyPreempt: BenchmarkPassSteady with preemption on.
func BenchmarkPassSteadyPreempt(b *testing.B) {
	s := preemptible(sim.BusySnapshot(10000, 100000))
	// The previous pass's reasons and preemptions recorded: its victims
	// are stopping for their preemptors.
	p := core.Schedule(s, s.Queue[len(s.Queue)-1].Submit)
	sim.SettleReasons(&s)
	by := map[uint64]uint64{}
	for _, pr := range p.Preemptions {
		by[pr.Victim] = pr.By
	}
	for i := range s.Running {
		s.Running[i].StoppingFor = by[s.Running[i].JobID]
	}
	benchPass(b, s, "")
}
