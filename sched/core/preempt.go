package core

import (
	"cmp"
	"slices"

	"github.com/troupe-hpc/troupe/internal/reason"
)

// The preemption stage, after place: a pending job that does not fit
// now and may preempt stops running jobs to start.
//
// A job may preempt a running one when the running job's partition (or
// QOS) has a preemption mode other than off and either
//
//   - the pending job's partition has a higher Tier than the running
//     job's, or
//   - the pending job's QOS lists the running job's in QOS.Preempt and
//     has a higher QOS priority, the running job's partition Tier being
//     no higher.
//
// Equal or higher rank (tier, then QOS priority) is never preempted. Nor
// is a job that has run less than its partition's PreemptExempt, nor one
// preempted within Policy.PreemptWindow (no thrashing), nor one already
// being stopped for another job.
//
// Victims are taken lowest rank first, youngest (latest start) first
// among equals, until what they free with what is free lets the whole
// gang start (the placement rules of place.go, never a partial gang);
// then each victim whose release turns out not to be needed is given
// back, highest first, so the set is minimal: no victim can be spared.
// A victim of mode suspend releases its CPUs and GPUs only: its memory
// stays held while it is frozen.
// A job that cannot start even with every candidate stopped stops none.
//
// The preemptor then holds a reservation, from now, on the nodes it
// would take: backfill may not use what its victims free (nor the free
// part of its nodes) until it starts. In later passes its victims, still
// stopping (Running.StoppingFor), are expected to end now, so the
// reservation stays on them, and it waits with reason.Preempting instead
// of choosing more.

// preemption is the preemption stage of one pass.
type preemption struct {
	on       bool
	stopping map[uint64]bool // running jobs being stopped, by id
	waiting  map[uint64]bool // pending jobs whose victims are still stopping
	// victims are, per pending job, the running jobs of the snapshot
	// being stopped for it.
	victims map[uint64][]*Running
	// none marks the partition and QOS pairs whose jobs found no
	// candidate in this pass, failed the gang shapes (with their QOS)
	// that could not start even with every candidate stopped: both only
	// grow worse as the pass goes on (victims taken, nodes filled).
	none   map[[2]string]bool
	failed map[failKey]bool
	cands  map[[2]string]*candidates
	// lastNone is the last pair found in none (hasLastNone: there is
	// one), checked before the map.
	lastNone    [2]string
	hasLastNone bool
	// chose counts the pending jobs that chose victims in this pass
	// (Policy.PreemptDepth bounds it).
	chose int
}

type failKey struct {
	sh  int32 // the pass's shape number (jobMeta.shape)
	qos string
}

func newPreemption(s *Snapshot) preemption {
	pr := preemption{}
	for i := range s.Running {
		if by := s.Running[i].StoppingFor; by != 0 {
			if pr.stopping == nil {
				pr.stopping, pr.waiting = map[uint64]bool{}, map[uint64]bool{}
				pr.victims = map[uint64][]*Running{}
			}
			pr.stopping[s.Running[i].JobID] = true
			pr.waiting[by] = true
			pr.victims[by] = append(pr.victims[by], &s.Running[i])
		}
	}
	modes := false
	for _, p := range s.Partitions {
		modes = modes || preempts(p.PreemptMode)
	}
	for _, q := range s.QOS {
		modes = modes || preempts(q.PreemptMode)
	}
	pr.on = modes
	return pr
}

// preempts reports whether a job of mode m may be preempted.
func preempts(m string) bool { return m != "" && m != PreemptOff }

// mode is how r is preempted: its QOS's mode, else its partition's.
func (p *pass) mode(r *Running) string {
	if q, ok := p.s.QOS[r.QOS]; ok && q.PreemptMode != "" {
		return q.PreemptMode
	}
	return p.s.Partitions[r.Partition].PreemptMode
}

// rank orders jobs for preemption: tier first, QOS priority second.
type rank struct{ tier, qos float64 }

func (p *pass) rankOf(part, qos string) rank {
	return rank{p.s.Partitions[part].Tier, p.s.QOS[qos].Priority}
}

func (a rank) less(b rank) bool { return a.tier < b.tier || (a.tier == b.tier && a.qos < b.qos) }

// may reports whether pending j may preempt running r.
func (p *pass) may(j *Job, r *Running) bool {
	if !preempts(p.mode(r)) || p.pre.stopping[r.JobID] {
		return false
	}
	jr, rr := p.rankOf(j.Partition, j.QOS), p.rankOf(r.Partition, r.QOS)
	if !rr.less(jr) {
		return false
	}
	if rr.tier < jr.tier {
		return true
	}
	return j.QOS != "" && r.QOS != "" && slices.Contains(p.s.QOS[j.QOS].Preempt, r.QOS)
}

// victim is a candidate with what it holds on the pass's nodes.
type victim struct {
	r    *Running
	rank rank
	uses []use
}

// candidates are the running jobs a job of partition part and QOS qos
// may preempt, in the order they are taken (lowest rank, then youngest
// first), with a cursor past the leading ones already stopping. Worked
// out once per pass and pair: only which are stopping changes.
type candidates struct {
	vs    []victim
	first int
}

func (p *pass) candidates(j *Job) *candidates {
	key := [2]string{j.Partition, j.QOS}
	if cs, ok := p.pre.cands[key]; ok {
		return cs
	}
	now := p.now
	cs := &candidates{}
	for i := range p.s.Running {
		r := &p.s.Running[i]
		if !p.may(j, r) {
			continue
		}
		if ex := p.s.Partitions[r.Partition].PreemptExempt; ex > 0 && now.Sub(r.Start) < ex {
			continue
		}
		if w := p.s.Policy.PreemptWindow; w > 0 && !r.Preempted.IsZero() && now.Sub(r.Preempted) < w {
			continue
		}
		v := victim{r: r, rank: p.rankOf(r.Partition, r.QOS)}
		suspend := p.mode(r) == PreemptSuspend
		useful := false
		for ci, name := range r.Nodes {
			n, ok := p.c.byName[name]
			if !ok || ci >= len(r.Containers) {
				continue
			}
			u := use{node: n, res: r.Containers[ci]}
			if suspend {
				u.res.Memory = 0 // a suspended job keeps its memory
			}
			if ci < len(r.GPUs) {
				u.shares = r.GPUs[ci]
			}
			v.uses = append(v.uses, u)
			useful = useful || p.c.nodes[n].inPartition(j.Partition)
		}
		if useful {
			cs.vs = append(cs.vs, v)
		}
	}
	slices.SortStableFunc(cs.vs, func(a, b victim) int {
		if a.rank != b.rank {
			if a.rank.less(b.rank) {
				return -1
			}
			return 1
		}
		if c := b.r.Start.Compare(a.r.Start); c != 0 {
			return c // youngest first
		}
		return cmp.Compare(b.r.JobID, a.r.JobID)
	})
	if p.pre.cands == nil {
		p.pre.cands = map[[2]string]*candidates{}
	}
	p.pre.cands[key] = cs
	return cs
}

// preempt tries to start j, of shape number sh (-1: none), by stopping
// running jobs; it reports whether it chose victims (and so set j's
// reason and reservation).
func (p *pass) preempt(j *Job, sh int32, quantum float64) bool {
	if !p.pre.on || p.pre.waiting[j.ID] || len(j.Containers) == 0 {
		return false
	}
	if d := p.s.Policy.PreemptDepth; d > 0 && p.pre.chose >= d {
		return false // the next pass tries it
	}
	pq := [2]string{j.Partition, j.QOS}
	if p.pre.lastNone == pq && p.pre.hasLastNone {
		return false // most jobs in a row are of one pair that may not preempt
	}
	uniform := sh >= 0
	if p.pre.none[pq] {
		p.pre.lastNone, p.pre.hasLastNone = pq, true
		return false
	}
	if uniform && p.pre.failed[failKey{sh, j.QOS}] {
		return false
	}
	if p.pre.none == nil {
		p.pre.none, p.pre.failed = map[[2]string]bool{}, map[failKey]bool{}
	}
	cs := p.candidates(j)
	for cs.first < len(cs.vs) && p.pre.stopping[cs.vs[cs.first].r.JobID] {
		cs.first++
	}
	if cs.first == len(cs.vs) {
		p.pre.none[pq] = true
		p.pre.lastNone, p.pre.hasLastNone = pq, true
		return false
	}
	// It fits what is free: a reservation, not a lack of resources, keeps
	// it waiting. Preempting would take no one's place.
	free := placer{c: p.c, quantum: quantum}
	if _, ok := free.place(j.Partition, j); ok {
		return false
	}
	var chosen []victim
	var g gangFit
	var ok bool
	if j.Mode == ModeMultiNode {
		chosen, g, ok = p.victimsGang(j, cs, quantum)
	} else {
		chosen, g, ok = p.victimsOne(j, cs, quantum)
	}
	if !ok {
		if uniform {
			p.pre.failed[failKey{sh, j.QOS}] = true
		}
		return false
	}
	if p.pre.stopping == nil {
		p.pre.stopping, p.pre.waiting = map[uint64]bool{}, map[uint64]bool{}
	}
	p.pre.waiting[j.ID] = true
	p.pre.chose++
	for _, v := range chosen {
		p.pre.stopping[v.r.JobID] = true
		p.plan.Preemptions = append(p.plan.Preemptions, Preemption{Victim: v.r.JobID, By: j.ID, Mode: p.mode(v.r)})
	}
	p.blocked = true
	p.plan.setReason(j, reason.Preempting)
	p.hold(j, g, chosen, quantum, true)
	return true
}

// holdStopping keeps, for j waiting while its victims of an earlier pass
// stop, its reservation on what they free: j placed as if they had
// ended (with what is free now), as when it chose them. It reports
// false when j no longer fits there (the nodes were taken meanwhile), or
// when a victim is suspended (frozen, it is not expected to end): then j
// reserves as any other job.
func (p *pass) holdStopping(j *Job, quantum float64) bool {
	rs := p.pre.victims[j.ID]
	if len(rs) == 0 || len(j.Containers) == 0 {
		return false
	}
	vs := make([]victim, 0, len(rs))
	for _, r := range rs {
		if r.Suspended {
			return false // frozen, not ending: it gives back nothing more
		}
		v := victim{r: r}
		for ci, name := range r.Nodes {
			n, ok := p.c.byName[name]
			if !ok || ci >= len(r.Containers) {
				continue
			}
			u := use{node: n, res: r.Containers[ci]}
			if ci < len(r.GPUs) {
				u.shares = r.GPUs[ci]
			}
			v.uses = append(v.uses, u)
		}
		vs = append(vs, v)
	}
	var g gangFit
	if j.Mode == ModeMultiNode {
		proj := slices.Clone(p.c.nodes)
		own := map[int32]bool{} // nodes whose devices proj owns
		for _, v := range vs {
			for _, u := range v.uses {
				if !own[u.node] {
					own[u.node] = true
					proj[u.node].dev = slices.Clone(proj[u.node].dev)
				}
				giveBack(&proj[u.node], u)
			}
		}
		var ok bool
		if g, ok = refPlace(proj, j.Partition, j, quantum, nil); !ok {
			return false
		}
	} else {
		all := allOf(len(j.Containers))
		gpuOnly := allGPU(j.Containers)
		found := false
		for _, v := range vs {
			for _, u := range v.uses {
				i := u.node
				n := p.c.nodes[i]
				if found || !n.inPartition(j.Partition) || (gpuOnly && !n.hasGPU()) || slices.Contains(j.Exclude, n.name) {
					continue
				}
				if n.dev != nil {
					n.dev = slices.Clone(n.dev)
				}
				for _, w := range vs {
					for _, wu := range w.uses {
						if wu.node == i {
							giveBack(&n, wu)
						}
					}
				}
				if f := fill(n.free, n.dev, n.devID, j.Containers, all, quantum, true); len(f.taken) == len(all) {
					g = gangFit{hosts: make([]int32, len(all))}
					g.assign(i, f, len(all))
					found = true
				}
			}
		}
		if !found {
			return false
		}
	}
	p.hold(j, g, vs, quantum, false)
	return true
}

// victimsOne chooses for a single-node job: the first node, taking the
// candidates in order, whose free resources with what its candidates
// release hold the whole job; the victims are that node's, the ones not
// needed spared.
func (p *pass) victimsOne(j *Job, cs *candidates, quantum float64) ([]victim, gangFit, bool) {
	type acc struct {
		n  nstate
		vs []victim
	}
	touched := map[int32]*acc{}
	all := allOf(len(j.Containers))
	gpuOnly := allGPU(j.Containers)
	for k := cs.first; k < len(cs.vs); k++ {
		v := cs.vs[k]
		if p.pre.stopping[v.r.JobID] {
			continue
		}
		var hit []int32
		for _, u := range v.uses {
			a := touched[u.node]
			if a == nil {
				n := p.c.nodes[u.node]
				if !n.inPartition(j.Partition) || (gpuOnly && !n.hasGPU()) {
					continue
				}
				if n.dev != nil {
					n.dev = slices.Clone(n.dev)
				}
				a = &acc{n: n}
				touched[u.node] = a
			}
			giveBack(&a.n, u)
			if len(a.vs) == 0 || a.vs[len(a.vs)-1].r != v.r {
				a.vs = append(a.vs, v)
			}
			hit = append(hit, u.node)
		}
		for _, i := range hit {
			a := touched[i]
			f := fill(a.n.free, a.n.dev, a.n.devID, j.Containers, all, quantum, true)
			if len(f.taken) != len(all) {
				continue
			}
			// Spare what is not needed, the last taken first.
			vs := a.vs
			for s := len(vs) - 2; s >= 0; s-- {
				n := a.n
				if n.dev != nil {
					n.dev = slices.Clone(n.dev)
				}
				for _, u := range vs[s].uses {
					if u.node == i {
						take(&n, u)
					}
				}
				if f2 := fill(n.free, n.dev, n.devID, j.Containers, all, quantum, true); len(f2.taken) == len(all) {
					a.n, f = n, f2
					vs = slices.Delete(slices.Clone(vs), s, s+1)
				}
			}
			g := gangFit{hosts: make([]int32, len(all))}
			g.assign(i, f, len(all))
			return vs, g, true
		}
	}
	return nil, gangFit{}, false
}

// victimsGang chooses for a multi-node gang: candidates in order until
// the whole gang fits what is free with what they release, then every
// one not needed spared, the last taken first.
func (p *pass) victimsGang(j *Job, cs *candidates, quantum float64) ([]victim, gangFit, bool) {
	proj := slices.Clone(p.c.nodes)
	for i := range proj {
		if proj[i].dev != nil {
			proj[i].dev = slices.Clone(proj[i].dev)
		}
	}
	need := sumOf(j.Containers, allOf(len(j.Containers)))
	var avail Res
	for i := range proj {
		if proj[i].inPartition(j.Partition) {
			avail = avail.Add(proj[i].free)
		}
	}
	var chosen []victim
	fits := false
	for k := cs.first; k < len(cs.vs) && !fits; k++ {
		v := cs.vs[k]
		if p.pre.stopping[v.r.JobID] {
			continue
		}
		for _, u := range v.uses {
			giveBack(&proj[u.node], u)
			if proj[u.node].inPartition(j.Partition) {
				avail = avail.Add(u.res)
			}
		}
		chosen = append(chosen, v)
		if coversCM(avail, need) {
			_, fits = refPlace(proj, j.Partition, j, quantum, nil)
		}
	}
	if !fits {
		return nil, gangFit{}, false
	}
	for k := len(chosen) - 2; k >= 0; k-- {
		for _, u := range chosen[k].uses {
			take(&proj[u.node], u)
		}
		if _, ok := refPlace(proj, j.Partition, j, quantum, nil); ok {
			chosen = slices.Delete(chosen, k, k+1)
			continue
		}
		for _, u := range chosen[k].uses {
			giveBack(&proj[u.node], u)
		}
	}
	g, _ := refPlace(proj, j.Partition, j, quantum, nil)
	return chosen, g, true
}

// hold reserves g for j from now: its victims' resources are expected
// back now, and backfill may use no more of g's nodes than j leaves.
// Without backfill the pass is strict from here: nobody else starts.
// chosen: the victims were chosen in this pass, their ends not yet moved
// to now.
func (p *pass) hold(j *Job, g gangFit, victims []victim, quantum float64, chosen bool) {
	if p.bf == nil {
		p.strict = true
		return
	}
	if chosen {
		ids := make([]uint64, len(victims))
		for k, v := range victims {
			ids[k] = v.r.JobID
		}
		p.bf.stopping(ids)
	}
	us := gangUses(j, g, p.c, quantum)
	after := map[int32]*nstate{} // g's nodes once the victims are gone and j is placed
	for _, u := range us {
		if after[u.node] == nil {
			n := p.c.nodes[u.node]
			if n.dev != nil {
				n.dev = slices.Clone(n.dev)
			}
			for _, v := range victims {
				for _, vu := range v.uses {
					if vu.node == u.node {
						giveBack(&n, vu)
					}
				}
			}
			after[u.node] = &n
		}
		take(after[u.node], u)
	}
	p.bf.hold(j.ID, us, after, p.now.UnixNano()+int64(walltime(j.Walltime)))
	p.plan.Starts = append(p.plan.Starts, StartEstimate{JobID: j.ID, Start: p.now, Nodes: p.c.names(g.hosts)})
}

// take charges u to n (the inverse of giveBack).
func take(n *nstate, u use) {
	n.free = n.free.Sub(u.res)
	takeShares(n, u.shares)
}

func allOf(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
