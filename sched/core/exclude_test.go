package core_test

import (
	"slices"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/sched/core"
)

// A job's excluded nodes (a node whose health check failed under it) are
// never its placement, nor its backfill reservation, whether it fits one
// node or spans several; other jobs still use them.
func TestExcludedNodes(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	c4 := core.Res{CPUMilli: 4000, Memory: 8 << 30}
	one := core.Res{CPUMilli: 1000, Memory: 1 << 30}
	nodes := func(free ...core.Res) []core.Node {
		var ns []core.Node
		for i, f := range free {
			ns = append(ns, core.Node{Name: "n" + string(rune('1'+i)), Capacity: c4, Free: f})
		}
		return ns
	}
	// n1 is the best fit (least free); the job excluding it goes to n2.
	s := core.Snapshot{
		Nodes: nodes(core.Res{CPUMilli: 1000, Memory: 2 << 30}, c4),
		Queue: []core.Job{
			{ID: 1, Containers: []core.Res{one}, Walltime: time.Hour, Exclude: []string{"n1"}},
			{ID: 2, Containers: []core.Res{one}, Walltime: time.Hour},
		},
	}
	got := map[uint64][]string{}
	for _, pl := range core.Schedule(s, now).Placements {
		got[pl.JobID] = pl.Nodes
	}
	if !slices.Equal(got[1], []string{"n2"}) || !slices.Equal(got[2], []string{"n1"}) {
		t.Fatalf("placements %v: want job 1 on n2 (n1 excluded), job 2 on n1 (best fit)", got)
	}
	// Only the excluded node has room: the job waits, with a start
	// estimate on n2 once the job there ends, never on n1.
	busy := core.Res{}
	s = core.Snapshot{
		Nodes: nodes(c4, busy),
		Running: []core.Running{{JobID: 9, Start: now, Walltime: time.Hour, Nodes: []string{"n2"},
			Containers: []core.Res{c4}}},
		Queue:  []core.Job{{ID: 1, Containers: []core.Res{one}, Walltime: time.Hour, Exclude: []string{"n1"}}},
		Policy: core.Policy{ReservationDepth: 1},
	}
	p := core.Schedule(s, now)
	if len(p.Placements) != 0 {
		t.Fatalf("job placed on its excluded node: %+v", p.Placements)
	}
	if len(p.Starts) != 1 || !slices.Equal(p.Starts[0].Nodes, []string{"n2"}) || !p.Starts[0].Start.Equal(now.Add(time.Hour)) {
		t.Fatalf("start estimate %+v: want n2 at %s", p.Starts, now.Add(time.Hour))
	}
	// A multi-node gang spreads over the nodes it does not exclude.
	s = core.Snapshot{
		Nodes: nodes(c4, c4, c4),
		Queue: []core.Job{{ID: 1, Mode: core.ModeMultiNode, Containers: []core.Res{c4, c4}, Walltime: time.Hour, Exclude: []string{"n2"}}},
	}
	p = core.Schedule(s, now)
	if len(p.Placements) != 1 || !slices.Equal(slices.Sorted(slices.Values(p.Placements[0].Nodes)), []string{"n1", "n3"}) {
		t.Fatalf("gang placements %+v: want [n1 n3]", p.Placements)
	}
}
