package core

import "github.com/troupe-hpc/troupe/sched/core/gpu"

// The fit stage: which of a gang's containers one node can hold.

// coversCM reports whether free has the CPU and memory of r.
func coversCM(free, r Res) bool { return free.CPUMilli >= r.CPUMilli && free.Memory >= r.Memory }

// fitOne reports whether one container r fits free (and devices dev) and
// takes it: from dev when the node has devices, else from the pool.
// dev is modified only on success; shares name device indexes (not IDs).
func fitOne(free *Res, dev []float64, r Res, quantum float64) (idx []int, share []float64, ok bool) {
	if !coversCM(*free, r) {
		return nil, nil, false
	}
	if r.GPU <= gpuEps {
		free.CPUMilli -= r.CPUMilli
		free.Memory -= r.Memory
		return nil, nil, true
	}
	if dev == nil {
		if free.GPU+gpuEps < r.GPU {
			return nil, nil, false
		}
		*free = free.Sub(r)
		return nil, nil, true
	}
	idx, share, ok = gpu.Pick(dev, r.GPU, quantum)
	if !ok {
		return nil, nil, false
	}
	free.CPUMilli -= r.CPUMilli
	free.Memory -= r.Memory
	free.GPU -= gpu.Round(r.GPU, quantum)
	return idx, share, true
}

// nodeFit is what one node takes of a gang.
type nodeFit struct {
	taken  []int        // container indexes, rank order
	shares [][]GPUShare // per taken container, device IDs; nil without devices
	rest   Res
}

// fill takes, in rank order, the containers of left that fit in free and
// the devices dev (dev is not modified). With all set it stops at the
// first container that does not fit and reports failure (taken empty).
func fill(free Res, dev []float64, devID []int, cs []Res, left []int, quantum float64, all bool) nodeFit {
	var f nodeFit
	var scratch []float64
	if dev != nil {
		scratch = append([]float64(nil), dev...)
	}
	for _, c := range left {
		idx, share, ok := fitOne(&free, scratch, cs[c], quantum)
		if !ok {
			if all {
				return nodeFit{}
			}
			continue
		}
		f.taken = append(f.taken, c)
		if len(idx) > 0 {
			if f.shares == nil {
				f.shares = make([][]GPUShare, 0, len(left))
			}
			for len(f.shares) < len(f.taken)-1 {
				f.shares = append(f.shares, nil)
			}
			gs := make([]GPUShare, len(idx))
			for k := range idx {
				gs[k] = GPUShare{Device: devID[idx[k]], Share: share[k]}
			}
			f.shares = append(f.shares, gs)
		}
	}
	if f.shares != nil {
		for len(f.shares) < len(f.taken) {
			f.shares = append(f.shares, nil)
		}
	}
	f.rest = free
	return f
}

// sumOf totals the containers of left.
func sumOf(cs []Res, left []int) Res {
	var t Res
	for _, c := range left {
		t = t.Add(cs[c])
	}
	return t
}

// minCPU is the smallest CPU request among left.
func minCPU(cs []Res, left []int) int64 {
	m := int64(-1)
	for _, c := range left {
		if m < 0 || cs[c].CPUMilli < m {
			m = cs[c].CPUMilli
		}
	}
	return m
}

// allGPU reports whether every container asks for a GPU.
func allGPU(cs []Res) bool {
	for _, c := range cs {
		if c.GPU <= gpuEps {
			return false
		}
	}
	return len(cs) > 0
}

// roundedGPU is what a GPU request takes: rounded to the quantum on nodes
// with devices, as asked on pooled nodes.
func roundedGPU(req, quantum float64, devices bool) float64 {
	if !devices {
		return req
	}
	return gpu.Round(req, quantum)
}
