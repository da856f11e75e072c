package core

import "slices"

// refPlace is the plain statement of the placement rules (see place.go):
// O(nodes) scans, no index. Property tests check placer against it, and
// Place and CanEverFit use it. open, when not nil, says which nodes the
// job may take at all (reservations); nil: every node.
func refPlace(nodes []nstate, part string, j *Job, quantum float64, open func(int32) bool) (gangFit, bool) {
	cs := j.Containers
	if len(cs) == 0 {
		return gangFit{}, false
	}
	gpuOnly := allGPU(cs)
	var cand []int32
	for i := range nodes {
		if nodes[i].inPartition(part) && (!gpuOnly || nodes[i].hasGPU()) && (open == nil || open(int32(i))) && !slices.Contains(j.Exclude, nodes[i].name) {
			cand = append(cand, int32(i))
		}
	}
	left := make([]int, len(cs))
	for i := range left {
		left[i] = i
	}
	g := gangFit{hosts: make([]int32, len(cs))}
	var used []int32
	for first := true; len(left) > 0; first = false {
		if !first && j.Mode != ModeMultiNode {
			return gangFit{}, false
		}
		// A node that holds everything left: the best fit of those.
		best, bestF := int32(-1), nodeFit{}
		for _, i := range cand {
			n := &nodes[i]
			if isUsed(used, i) {
				continue
			}
			f := fill(n.free, n.dev, n.devID, cs, left, quantum, true)
			if len(f.taken) == len(left) && (best < 0 || keyLess(n.key(i, gpuOnly), nodes[best].key(best, gpuOnly))) {
				best, bestF = i, f
			}
		}
		if best >= 0 {
			g.assign(best, bestF, len(cs))
			return g, true
		}
		if j.Mode != ModeMultiNode {
			return gangFit{}, false
		}
		// Else the node that holds the most, ties to the most free.
		for _, i := range cand {
			n := &nodes[i]
			if isUsed(used, i) {
				continue
			}
			f := fill(n.free, n.dev, n.devID, cs, left, quantum, false)
			if len(f.taken) == 0 {
				continue
			}
			if best < 0 || len(f.taken) > len(bestF.taken) ||
				(len(f.taken) == len(bestF.taken) && keyLess(nodes[best].key(best, gpuOnly), n.key(i, gpuOnly))) {
				best, bestF = i, f
			}
		}
		if best < 0 {
			return gangFit{}, false
		}
		g.assign(best, bestF, len(cs))
		used = append(used, best)
		left = without(left, bestF.taken)
	}
	return g, true
}

// Place finds nodes for every container of j over nodes, as Schedule
// would with no partition and no quantum, or reports false. nodes is not
// modified.
func Place(nodes []Node, j Job) ([]string, bool) {
	c := newCluster(nodes)
	g, ok := refPlace(c.nodes, j.Partition, &j, 0, nil)
	if !ok {
		return nil, false
	}
	return c.names(g.hosts), true
}

// CanEverFit reports whether the job fits the nodes when all are empty.
func CanEverFit(nodes []Node, j Job) bool {
	empty := make([]Node, len(nodes))
	for i, n := range nodes {
		e := Node{Name: n.Name, Capacity: n.Capacity, Free: n.Capacity, Partitions: n.Partitions}
		for _, d := range n.Devices {
			e.Devices = append(e.Devices, Device{ID: d.ID, Free: 1})
		}
		empty[i] = e
	}
	_, ok := Place(empty, j)
	return ok
}

func (c *cluster) names(hosts []int32) []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = c.nodes[h].name
	}
	return out
}
