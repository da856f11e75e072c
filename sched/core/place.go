package core

import "sort"

// Place finds nodes for every container of j, or reports false: all or
// nothing. single-node puts the whole gang on one node; multi-node does
// too when one node can hold it (less network), else spreads it over the
// fewest nodes. Among candidates it prefers the best fit: the node left
// with the least free CPU, then memory, then the lowest name, so big holes
// stay open for big jobs. nodes is not modified.
func Place(nodes []Node, j Job) ([]string, bool) {
	if len(j.Containers) == 0 {
		return nil, false
	}
	if n, ok := bestSingle(nodes, j); ok {
		hosts := make([]string, len(j.Containers))
		for i := range hosts {
			hosts[i] = n
		}
		return hosts, true
	}
	if j.Mode != ModeMultiNode {
		return nil, false
	}
	return spread(nodes, j)
}

// bestSingle is the best-fit node that holds the whole gang.
func bestSingle(nodes []Node, j Job) (string, bool) {
	var total Res
	for _, c := range j.Containers {
		total = total.Add(c)
	}
	best := -1
	for i, n := range nodes {
		if !n.Free.Covers(total) {
			continue
		}
		if best < 0 || tighter(n.Free.Sub(total), nodes[best].Free.Sub(total), n.Name, nodes[best].Name) {
			best = i
		}
	}
	if best < 0 {
		return "", false
	}
	return nodes[best].Name, true
}

// tighter orders leftovers: less CPU, then less memory, then name.
func tighter(a, b Res, an, bn string) bool {
	if a.CPUMilli != b.CPUMilli {
		return a.CPUMilli < b.CPUMilli
	}
	if a.Memory != b.Memory {
		return a.Memory < b.Memory
	}
	return an < bn
}

// spread places the gang over the fewest nodes: it repeatedly takes the
// node that holds the most of the containers still unplaced (ties: best
// fit), fills it, and goes on. For gangs of equal containers, which is
// the common case, this is the fewest nodes possible.
func spread(nodes []Node, j Job) ([]string, bool) {
	free := make([]Res, len(nodes))
	for i, n := range nodes {
		free[i] = n.Free
	}
	hosts := make([]string, len(j.Containers))
	left := make([]int, len(j.Containers))
	for i := range left {
		left[i] = i
	}
	used := make([]bool, len(nodes))
	for len(left) > 0 {
		best, bestTaken, bestFree := -1, []int(nil), Res{}
		for i := range nodes {
			if used[i] {
				continue
			}
			taken, rest := fill(free[i], j.Containers, left)
			if len(taken) == 0 {
				continue
			}
			if best < 0 || len(taken) > len(bestTaken) ||
				(len(taken) == len(bestTaken) && tighter(rest, bestFree, nodes[i].Name, nodes[best].Name)) {
				best, bestTaken, bestFree = i, taken, rest
			}
		}
		if best < 0 {
			return nil, false
		}
		used[best] = true
		for _, c := range bestTaken {
			hosts[c] = nodes[best].Name
		}
		left = without(left, bestTaken)
	}
	return hosts, true
}

// fill takes, in rank order, the unplaced containers that fit in free.
func fill(free Res, cs []Res, left []int) (taken []int, rest Res) {
	for _, c := range left {
		if free.Covers(cs[c]) {
			free = free.Sub(cs[c])
			taken = append(taken, c)
		}
	}
	return taken, free
}

func without(left, taken []int) []int {
	drop := make(map[int]bool, len(taken))
	for _, t := range taken {
		drop[t] = true
	}
	out := left[:0]
	for _, l := range left {
		if !drop[l] {
			out = append(out, l)
		}
	}
	sort.Ints(out)
	return out
}
