package core

import (
	"reflect"
	"testing"
	"time"
)

func gpuNode(name string, free ...float64) Node {
	n := Node{Name: name, Capacity: Res{CPUMilli: 16000, Memory: 64 * gib, GPU: float64(len(free))}}
	n.Free = n.Capacity
	n.Free.GPU = 0
	for i, f := range free {
		n.Devices = append(n.Devices, Device{ID: i, Free: f})
		n.Free.GPU += f
	}
	return n
}

func gpuJob(id uint64, mode string, gpus ...float64) Job {
	j := Job{ID: id, Mode: mode}
	for _, g := range gpus {
		j.Containers = append(j.Containers, Res{CPUMilli: 1000, Memory: gib, GPU: g})
	}
	return j
}

// The fragmentation cases Backend.AI users hit, through Schedule.
func TestScheduleFractionalGPU(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		queue []Job
		want  []Placement
	}{
		{
			"free shares in total but none on one device: a 1.0 waits",
			[]Node{gpuNode("g1", 0.5, 0.5)},
			[]Job{gpuJob(1, ModeSingleNode, 1)},
			nil,
		},
		{
			"a 1.0 request after two 0.5s: best fit packs the halves on one device",
			[]Node{gpuNode("g1", 1, 1)},
			[]Job{gpuJob(1, ModeSingleNode, 0.5), gpuJob(2, ModeSingleNode, 0.5), gpuJob(3, ModeSingleNode, 1)},
			[]Placement{
				{JobID: 1, Nodes: []string{"g1"}, GPUs: [][]GPUShare{{{0, 0.5}}}},
				{JobID: 2, Nodes: []string{"g1"}, GPUs: [][]GPUShare{{{0, 0.5}}}},
				{JobID: 3, Nodes: []string{"g1"}, GPUs: [][]GPUShare{{{1, 1}}}},
			},
		},
		{
			"quantum rounds up: 0.3 takes 0.5 of a device with quantum 0.25",
			[]Node{gpuNode("g1", 1)},
			[]Job{gpuJob(1, ModeSingleNode, 0.3), gpuJob(2, ModeSingleNode, 0.5), gpuJob(3, ModeSingleNode, 0.25)},
			[]Placement{
				{JobID: 1, Nodes: []string{"g1"}, GPUs: [][]GPUShare{{{0, 0.5}}}},
				{JobID: 2, Nodes: []string{"g1"}, GPUs: [][]GPUShare{{{0, 0.5}}}},
			},
		},
		{
			"a gang of two halves shares one device; the whole one stays whole",
			[]Node{gpuNode("g1", 1, 1)},
			[]Job{gpuJob(1, ModeSingleNode, 0.5, 0.5), gpuJob(2, ModeSingleNode, 1)},
			[]Placement{
				{JobID: 1, Nodes: []string{"g1", "g1"}, GPUs: [][]GPUShare{{{0, 0.5}}, {{0, 0.5}}}},
				{JobID: 2, Nodes: []string{"g1"}, GPUs: [][]GPUShare{{{1, 1}}}},
			},
		},
		{
			"a request above one takes whole devices, across the best-fit node",
			[]Node{gpuNode("g1", 1, 0.5, 1), gpuNode("g2", 1, 1, 1, 1)},
			[]Job{gpuJob(1, ModeSingleNode, 2)},
			[]Placement{{JobID: 1, Nodes: []string{"g1"}, GPUs: [][]GPUShare{{{0, 1}, {2, 1}}}}},
		},
		{
			"the device with the least room left that still fits wins across nodes too",
			[]Node{gpuNode("a", 1), gpuNode("b", 0.5)},
			[]Job{gpuJob(1, ModeSingleNode, 0.5)},
			[]Placement{{JobID: 1, Nodes: []string{"b"}, GPUs: [][]GPUShare{{{0, 0.5}}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Snapshot{Nodes: tt.nodes, Queue: tt.queue, Partitions: map[string]Partition{"": {GPUQuantum: 0.25}},
				Policy: Policy{ReservationDepth: 1}}
			p := Schedule(s, time.Unix(0, 0))
			if !reflect.DeepEqual(p.Placements, tt.want) {
				t.Fatalf("placements:\n got %+v\nwant %+v", p.Placements, tt.want)
			}
		})
	}
}
