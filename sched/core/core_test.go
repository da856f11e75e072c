package core

import (
	"reflect"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/reason"
)

const gib = 1 << 30

func node(name string, cpu int64, memGiB int64) Node {
	r := Res{CPUMilli: cpu * 1000, Memory: memGiB * gib}
	return Node{Name: name, Capacity: r, Free: r}
}

func gang(id uint64, mode string, n int, cpu int64) Job {
	cs := make([]Res, n)
	for i := range cs {
		cs[i] = Res{CPUMilli: cpu * 1000, Memory: gib}
	}
	return Job{ID: id, Mode: mode, Containers: cs}
}

func TestPlace(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		job   Job
		want  []string // nil: does not fit
	}{
		{"single fits best-fit node", []Node{node("a", 8, 16), node("b", 4, 16)}, gang(1, ModeSingleNode, 3, 1), []string{"b", "b", "b"}},
		{"single never splits", []Node{node("a", 2, 16), node("b", 2, 16)}, gang(1, ModeSingleNode, 3, 1), nil},
		{"multi stays on one node when it can", []Node{node("a", 4, 16), node("b", 4, 16)}, gang(1, ModeMultiNode, 3, 1), []string{"a", "a", "a"}},
		{"multi spreads over fewest nodes", []Node{node("a", 2, 16), node("b", 4, 16), node("c", 2, 16)}, gang(1, ModeMultiNode, 5, 1), []string{"b", "b", "b", "b", "a"}},
		{"multi too big for all", []Node{node("a", 2, 16), node("b", 2, 16)}, gang(1, ModeMultiNode, 5, 1), nil},
		{"memory bounds too", []Node{{Name: "a", Capacity: Res{8000, gib / 2, 0}, Free: Res{8000, gib / 2, 0}}}, gang(1, ModeSingleNode, 1, 1), nil},
		{"gpu fraction", []Node{{Name: "g", Capacity: Res{8000, 8 * gib, 1}, Free: Res{8000, 8 * gib, 0.5}}}, Job{ID: 1, Mode: ModeSingleNode, Containers: []Res{{1000, gib, 0.5}}}, []string{"g"}},
		{"empty gang", []Node{node("a", 2, 2)}, Job{ID: 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Place(tt.nodes, tt.job)
			if tt.want == nil {
				if ok {
					t.Fatalf("placed %v, want no fit", got)
				}
				return
			}
			if !ok || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Place = %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
}

func TestScheduleFIFO(t *testing.T) {
	s := Snapshot{
		Nodes: []Node{node("a", 4, 16), node("b", 4, 16)},
		Queue: []Job{
			gang(1, ModeSingleNode, 3, 1),
			gang(2, ModeMultiNode, 4, 1),
			gang(3, ModeSingleNode, 4, 1), // does not fit after 1 and 2
			gang(4, ModeSingleNode, 1, 1), // would fit, but strict FIFO holds it
		},
	}
	p := Schedule(s, time.Unix(0, 0))
	want := Plan{
		Placements: []Placement{
			{JobID: 1, Nodes: []string{"a", "a", "a"}},
			{JobID: 2, Nodes: []string{"b", "b", "b", "b"}},
		},
		Reasons: []ReasonChange{{3, reason.Resources}, {4, reason.Priority}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("plan:\n got %+v\nwant %+v", p, want)
	}
	// A second pass with the reasons already set changes nothing for them.
	s.Queue[2].Reason, s.Queue[3].Reason = reason.Resources, reason.Priority
	s.Queue = s.Queue[2:]
	s.Nodes[0].Free, s.Nodes[1].Free = Res{1000, 13 * gib, 0}, Res{0, 12 * gib, 0}
	if p := Schedule(s, time.Unix(0, 0)); !p.Empty() {
		t.Fatalf("steady state plan not empty: %+v", p)
	}
}

func TestScheduleNeverOvercommits(t *testing.T) {
	nodes := []Node{node("a", 3, 4), node("b", 5, 4), node("c", 2, 4)}
	var q []Job
	for i := 1; i <= 40; i++ {
		mode := ModeSingleNode
		if i%2 == 0 {
			mode = ModeMultiNode
		}
		q = append(q, gang(uint64(i), mode, 1+i%4, int64(1+i%2)))
	}
	p := Schedule(Snapshot{Nodes: nodes, Queue: q}, time.Unix(0, 0))
	used := map[string]Res{}
	byID := map[uint64]Job{}
	for _, j := range q {
		byID[j.ID] = j
	}
	for _, pl := range p.Placements {
		j := byID[pl.JobID]
		if len(pl.Nodes) != len(j.Containers) {
			t.Fatalf("job %d: partial gang %v", j.ID, pl.Nodes)
		}
		for i, n := range pl.Nodes {
			used[n] = used[n].Add(j.Containers[i])
		}
	}
	for _, n := range nodes {
		if !n.Capacity.Covers(used[n.Name]) {
			t.Errorf("node %s overcommitted: %+v of %+v", n.Name, used[n.Name], n.Capacity)
		}
	}
}

func TestCanEverFit(t *testing.T) {
	busy := node("a", 4, 16)
	busy.Free = Res{}
	if !CanEverFit([]Node{busy}, gang(1, ModeSingleNode, 4, 1)) {
		t.Error("job that fits an empty node refused")
	}
	if CanEverFit([]Node{busy}, gang(1, ModeSingleNode, 5, 1)) {
		t.Error("job wider than any node accepted")
	}
}
