package core

import (
	"math"
	"slices"
	"strings"

	"github.com/google/btree"
)

// nodeKey orders nodes for best fit: least free GPU (in the index of GPU
// nodes only; 0 elsewhere), then CPU, then memory, then name (nodes are
// numbered in name order).
type nodeKey struct {
	gpu      float64
	cpu, mem int64
	i        int32
}

func keyLess(a, b nodeKey) bool {
	if a.gpu != b.gpu {
		return a.gpu < b.gpu
	}
	if a.cpu != b.cpu {
		return a.cpu < b.cpu
	}
	if a.mem != b.mem {
		return a.mem < b.mem
	}
	return a.i < b.i
}

// nstate is a node during one pass: the snapshot's node plus what this
// pass has taken from it.
type nstate struct {
	name  string
	cap   Res
	free  Res
	dev   []float64 // free share per device; nil: GPUs are a pool
	devID []int
	parts []string
}

// key is the node's key in an index; gpu selects the GPU nodes' order.
func (n *nstate) key(i int32, gpu bool) nodeKey {
	k := nodeKey{cpu: n.free.CPUMilli, mem: n.free.Memory, i: i}
	if gpu {
		k.gpu = n.free.GPU
	}
	return k
}

func (n *nstate) hasGPU() bool { return n.cap.GPU > gpuEps || len(n.dev) > 0 }

func (n *nstate) inPartition(p string) bool {
	return p == "" || len(n.parts) == 0 || slices.Contains(n.parts, p)
}

// index is an ordered set of the nodes of one partition.
type index = btree.BTreeG[nodeKey]

type indexKey struct {
	part string
	gpu  bool // only nodes with GPUs
}

// cluster is the pass's mutable copy of the nodes with best-fit indexes,
// built per partition on first use and kept up to date as jobs take
// resources.
type cluster struct {
	nodes    []nstate
	byName   map[string]int32
	idx      map[indexKey]*index
	totalCPU int64
}

func newCluster(ns []Node) *cluster {
	c := &cluster{nodes: make([]nstate, len(ns)), idx: map[indexKey]*index{}}
	ndev := 0
	for _, n := range ns {
		ndev += len(n.Devices)
	}
	flat := make([]float64, 0, ndev)
	for i, n := range ns {
		s := nstate{name: n.Name, cap: n.Capacity, free: n.Free, parts: n.Partitions}
		if len(n.Devices) > 0 {
			start := len(flat)
			s.devID = make([]int, len(n.Devices))
			for k, d := range n.Devices {
				flat = append(flat, d.Free)
				s.devID[k] = d.ID
			}
			s.dev = flat[start:len(flat):len(flat)]
		}
		c.nodes[i] = s
		c.totalCPU += n.Capacity.CPUMilli
	}
	if !slices.IsSortedFunc(c.nodes, byName) {
		slices.SortFunc(c.nodes, byName)
	}
	c.byName = make(map[string]int32, len(c.nodes))
	for i := range c.nodes {
		c.byName[c.nodes[i].name] = int32(i)
	}
	return c
}

func byName(a, b nstate) int { return strings.Compare(a.name, b.name) }

// index returns the best-fit index over the partition's nodes (only those
// with GPUs when gpu is set).
func (c *cluster) index(part string, gpu bool) *index {
	k := indexKey{part, gpu}
	if t, ok := c.idx[k]; ok {
		return t
	}
	t := btree.NewG(32, keyLess)
	for i := range c.nodes {
		n := &c.nodes[i]
		if n.inPartition(part) && (!gpu || n.hasGPU()) {
			t.ReplaceOrInsert(n.key(int32(i), gpu))
		}
	}
	c.idx[k] = t
	return t
}

// take charges r (and the device shares) to node i and re-indexes it.
func (c *cluster) take(i int32, r Res, shares []GPUShare) {
	n := &c.nodes[i]
	old, oldG := n.key(i, false), n.key(i, true)
	n.free = n.free.Sub(r)
	takeShares(n, shares)
	for k, t := range c.idx {
		if n.inPartition(k.part) && (!k.gpu || n.hasGPU()) {
			o, nk := old, n.key(i, false)
			if k.gpu {
				o, nk = oldG, n.key(i, true)
			}
			if o != nk {
				t.Delete(o)
				t.ReplaceOrInsert(nk)
			}
		}
	}
}

func takeShares(n *nstate, shares []GPUShare) {
	for _, s := range shares {
		if d := n.devIndex(s.Device); d >= 0 {
			n.dev[d] = math.Max(0, n.dev[d]-s.Share)
		}
	}
}

func (n *nstate) devIndex(id int) int {
	for k, d := range n.devID {
		if d == id {
			return k
		}
	}
	return -1
}
