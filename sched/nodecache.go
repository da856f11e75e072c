package sched

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/state"
)

// nodeCache keeps the empty view of the nodes that take work (their
// capacity, partitions and GPU devices, all free) until a node or the
// config changes: every scheduling pass starts from it and subtracts what
// live containers hold, and submit's can-ever-fit check places gangs on
// it. Building it reads every node and matches it against every
// partition, which on a 10,000-node cluster costs more than the
// scheduling pass itself.
//
// It also keeps submit's answers per (partition, job shape): a check
// places the gang on every node of the partition, O(nodes), and jobs come
// in few shapes.
type nodeCache struct {
	mu        sync.Mutex
	nodesAt   uint64 // NodesIndex the entries hold for
	cfgAt     uint64 // ConfigIndex likewise
	all       []core.Node
	undrained []core.Node // all less the drained nodes
	byPart    map[string][]core.Node
	fits      map[string]bool
}

// maxShapes bounds the answers kept between node changes.
const maxShapes = 4096

// refresh drops everything when a node or the config changed since it
// was built; the cache must be locked.
func (c *nodeCache) refresh(v *state.Snapshot) {
	at, cfgAt := v.NodesIndex(), v.ConfigIndex()
	if c.byPart != nil && at == c.nodesAt && cfgAt == c.cfgAt {
		return
	}
	c.nodesAt, c.cfgAt = at, cfgAt
	c.all = partitionedNodes(v, v.Config())
	c.undrained = undrained(v, c.all)
	c.byPart, c.fits = map[string][]core.Node{}, map[string]bool{}
}

// empty is every node that takes work, free, sorted by name. The slice
// and its nodes are shared: callers copy before they change anything.
func (c *nodeCache) empty(v *state.Snapshot) []core.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refresh(v)
	return c.all
}

// open is the nodes that take new work: empty less the drained ones. The
// slice is shared like empty's.
func (c *nodeCache) open(v *state.Snapshot) []core.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refresh(v)
	return c.undrained
}

// undrained is nodes less those drained in v, by an admin or by their
// failing health check (nodes itself when none is).
func undrained(v *state.Snapshot, nodes []core.Node) []core.Node {
	drained := map[string]bool{}
	for _, n := range v.Nodes() {
		if n.Drain || n.Health != "" {
			drained[n.Name] = true
		}
	}
	if len(drained) == 0 {
		return nodes
	}
	out := make([]core.Node, 0, len(nodes))
	for _, n := range nodes {
		if !drained[n.Name] {
			out = append(out, n)
		}
	}
	return out
}

// partitionNodes is the partition's nodes, empty; the cache must be locked.
func (c *nodeCache) partitionNodes(v *state.Snapshot, part string) []core.Node {
	c.refresh(v)
	if ns, ok := c.byPart[part]; ok {
		return ns
	}
	var mine []core.Node
	for _, n := range c.all {
		if slices.Contains(n.Partitions, part) {
			mine = append(mine, n)
		}
	}
	c.byPart[part] = mine
	return mine
}

// check says "" when j can run in its partition once the partition is
// empty (or has no nodes yet: it waits for them), else why not.
func (c *nodeCache) check(v *state.Snapshot, j *state.Job) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	nodes := c.partitionNodes(v, j.Partition)
	if len(nodes) == 0 {
		return ""
	}
	cj := coreJob(j)
	// Whether the job can ever fit is the shape's: a node it excludes
	// may be replaced or renamed, and answers are kept per shape.
	cj.Exclude = nil
	key := shapeKey(j.Partition, cj)
	fits, ok := c.fits[key]
	if !ok {
		fits = core.CanEverFit(nodes, cj)
		if len(c.fits) >= maxShapes {
			clear(c.fits)
		}
		c.fits[key] = fits
	}
	if fits {
		return ""
	}
	return neverFits(j, nodes)
}

func shapeKey(part string, j core.Job) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s", part, j.Mode)
	for _, r := range j.Containers {
		fmt.Fprintf(&b, "|%d,%d,%g", r.CPUMilli, r.Memory, r.GPU)
	}
	return b.String()
}
