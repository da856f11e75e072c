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
