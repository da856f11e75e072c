package core

import "math"

// Gang placement: feasibility (partition, GPU nodes) → fit (fill, one node
// at a time) → rank (best fit through the node index). All containers or
// none:
//
//   - single-node: the best-fit node that holds the whole gang;
//   - multi-node: the same when one node can hold it all (less network);
//     else, repeatedly, the node that holds the most of what is left (ties:
//     the most free), until what is left fits one node, which is then
//     chosen best fit. For gangs of equal containers this is the fewest
//     nodes possible.
//
// "Best fit" is the node left with the least free CPU, then memory, then
// the lowest name, so big holes stay open for big jobs. refPlace is the
// plain O(nodes) statement of the same rules that the property tests
// compare with.

// gangFit is a placement found but not yet committed.
type gangFit struct {
	hosts  []int32
	shares [][]GPUShare // nil when no container got devices
}

// placer finds gang placements over a cluster, optionally limited by
// backfill reservations for a job that would run until end.
type placer struct {
	c       *cluster
	bf      *backfill
	end     int64
	quantum float64
	gpu     bool // placing in the GPU nodes' index
	// gate, when set, keeps the job off nodes a reservation holds while
	// it would run (from now until end); own is the job's reservation.
	gate *gate
	own  int32
	from int64
}

// avail is what node i offers the job being placed; ok is false when a
// reservation keeps the job off it.
func (p *placer) avail(i int32) (free Res, dev []float64, ok bool) {
	if p.gate != nil && !p.gate.open(i, p.own, p.from, p.end) {
		return Res{}, nil, false
	}
	n := &p.c.nodes[i]
	if p.bf == nil {
		return n.free, n.dev, true
	}
	free, dev = p.bf.limit(i, n, p.end)
	return free, dev, true
}

// place finds a placement of j in part, or reports false.
func (p *placer) place(part string, j *Job) (gangFit, bool) {
	cs := j.Containers
	if len(cs) == 0 {
		return gangFit{}, false
	}
	p.gpu = allGPU(cs)
	t := p.c.index(part, p.gpu)
	left := make([]int, len(cs))
	for i := range left {
		left[i] = i
	}
	g := gangFit{hosts: make([]int32, len(cs))}
	excl := p.c.excluded(j)
	if i, f, ok := p.holdsAll(t, cs, left, excl); ok {
		g.assign(i, f, len(cs))
		return g, true
	}
	if j.Mode != ModeMultiNode {
		return gangFit{}, false
	}
	used := excl
	for len(left) > 0 {
		if i, f, ok := p.holdsAll(t, cs, left, used); ok {
			g.assign(i, f, len(cs))
			return g, true
		}
		i, f, ok := p.most(t, cs, left, used)
		if !ok {
			return gangFit{}, false
		}
		g.assign(i, f, len(cs))
		used = append(used, i)
		left = without(left, f.taken)
	}
	return g, true
}

// holdsAll is the best-fit unused node that takes every container of left.
func (p *placer) holdsAll(t *index, cs []Res, left []int, used []int32) (int32, nodeFit, bool) {
	tot := sumOf(cs, left)
	var best nodeFit
	found := int32(-1)
	pivot := nodeKey{cpu: tot.CPUMilli, mem: math.MinInt64, i: -1}
	if p.gpu {
		pivot = nodeKey{gpu: tot.GPU - gpuEps, cpu: math.MinInt64, mem: math.MinInt64, i: -1}
	}
	t.AscendGreaterOrEqual(pivot, func(k nodeKey) bool {
		if k.cpu < tot.CPUMilli || k.mem < tot.Memory || isUsed(used, k.i) {
			return true
		}
		free, dev, ok := p.avail(k.i)
		if !ok || !coversCM(free, tot) {
			return true
		}
		f := fill(free, dev, p.c.nodes[k.i].devID, cs, left, p.quantum, true)
		if len(f.taken) == len(left) {
			found, best = k.i, f
			return false
		}
		return true
	})
	return found, best, found >= 0
}

// most is the unused node that takes the most containers of left, ties to
// the most free; it stops as soon as no node further down the index can
// take more by CPU alone.
func (p *placer) most(t *index, cs []Res, left []int, used []int32) (int32, nodeFit, bool) {
	mc := minCPU(cs, left)
	mg := minEach(pick(cs, left)).GPU
	var best nodeFit
	found := int32(-1)
	t.Descend(func(k nodeKey) bool {
		bound := int64(len(left))
		switch {
		case p.gpu && mg > gpuEps:
			bound = min(bound, int64((k.gpu+gpuEps)/mg))
		case !p.gpu && mc > 0:
			bound = min(bound, k.cpu/mc)
		}
		if bound <= int64(len(best.taken)) {
			return false
		}
		if isUsed(used, k.i) {
			return true
		}
		free, dev, ok := p.avail(k.i)
		if !ok {
			return true
		}
		f := fill(free, dev, p.c.nodes[k.i].devID, cs, left, p.quantum, false)
		if len(f.taken) > len(best.taken) {
			found, best = k.i, f
		}
		return true
	})
	return found, best, found >= 0
}

func (g *gangFit) assign(node int32, f nodeFit, n int) {
	for k, c := range f.taken {
		g.hosts[c] = node
		if f.shares != nil && f.shares[k] != nil {
			if g.shares == nil {
				g.shares = make([][]GPUShare, n)
			}
			g.shares[c] = f.shares[k]
		}
	}
}

// excluded is the nodes of c that j excludes (Job.Exclude), as indexes:
// placement treats them as used by the gang already.
func (c *cluster) excluded(j *Job) []int32 {
	var out []int32
	for _, name := range j.Exclude {
		if i, ok := c.byName[name]; ok {
			out = append(out, i)
		}
	}
	return out
}

func pick(cs []Res, left []int) []Res {
	out := make([]Res, len(left))
	for k, c := range left {
		out[k] = cs[c]
	}
	return out
}

func isUsed(used []int32, i int32) bool {
	for _, u := range used {
		if u == i {
			return true
		}
	}
	return false
}

// without returns left minus taken; both are in ascending order.
func without(left, taken []int) []int {
	out := make([]int, 0, len(left)-len(taken))
	k := 0
	for _, l := range left {
		if k < len(taken) && taken[k] == l {
			k++
			continue
		}
		out = append(out, l)
	}
	return out
}

// commit charges a found placement to the cluster.
func (c *cluster) commit(j *Job, g gangFit, quantum float64) {
	for ci, h := range g.hosts {
		r := j.Containers[ci]
		var sh []GPUShare
		if g.shares != nil {
			sh = g.shares[ci]
		}
		if sh != nil || c.nodes[h].dev != nil {
			r.GPU = roundedGPU(r.GPU, quantum, c.nodes[h].dev != nil)
		}
		c.take(h, r, sh)
	}
}
