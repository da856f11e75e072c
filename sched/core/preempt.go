package core

import (
	"cmp"
	"slices"
	"time"

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
	// none marks the partition and QOS pairs whose jobs found no
	// candidate in this pass, failed the gang shapes (with their QOS)
	// that could not start even with every candidate stopped: both only
	// grow worse as the pass goes on (victims taken, nodes filled).
	none   map[[2]string]bool
	failed map[failKey]bool
}

type failKey struct {
	sh  shape
	qos string
}

func newPreemption(s *Snapshot) preemption {
	pr := preemption{}
	for i := range s.Running {
		if by := s.Running[i].StoppingFor; by != 0 {
			if pr.stopping == nil {
				pr.stopping, pr.waiting = map[uint64]bool{}, map[uint64]bool{}
			}
			pr.stopping[s.Running[i].JobID] = true
			pr.waiting[by] = true
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

// preempt tries to start j by stopping running jobs; it reports whether
// it chose victims (and so set j's reason and reservation).
func (p *pass) preempt(j *Job, quantum float64) bool {
	if !p.pre.on || p.pre.waiting[j.ID] || len(j.Containers) == 0 {
		return false
	}
	pq := [2]string{j.Partition, j.QOS}
	sh, uniform := shapeOf(j)
	if p.pre.none[pq] || (uniform && p.pre.failed[failKey{sh, j.QOS}]) {
		return false
	}
	if p.pre.none == nil {
		p.pre.none, p.pre.failed = map[[2]string]bool{}, map[failKey]bool{}
	}
	now := p.now
	var cands []victim
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
		useful := false
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
			useful = useful || p.c.nodes[n].inPartition(j.Partition)
		}
		if useful {
			cands = append(cands, v)
		}
	}
	if len(cands) == 0 {
		p.pre.none[pq] = true
		return false
	}
	proj := slices.Clone(p.c.nodes)
	for i := range proj {
		if proj[i].dev != nil {
			proj[i].dev = slices.Clone(proj[i].dev)
		}
	}
	if _, ok := refPlace(proj, j.Partition, j, quantum); ok {
		// It fits what is free: a reservation, not a lack of resources,
		// keeps it waiting. Preempting would take no one's place.
		return false
	}
	slices.SortStableFunc(cands, func(a, b victim) int {
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
	need := sumOf(j.Containers, allOf(len(j.Containers)))
	var avail Res
	for i := range proj {
		if proj[i].inPartition(j.Partition) {
			avail = avail.Add(proj[i].free)
		}
	}
	chosen := 0
	fits := false
	for chosen < len(cands) && !fits {
		for _, u := range cands[chosen].uses {
			giveBack(&proj[u.node], u)
			if proj[u.node].inPartition(j.Partition) {
				avail = avail.Add(u.res)
			}
		}
		chosen++
		if coversCM(avail, need) {
			_, fits = refPlace(proj, j.Partition, j, quantum)
		}
	}
	if !fits {
		if uniform {
			p.pre.failed[failKey{sh, j.QOS}] = true
		}
		return false
	}
	// Spare every victim not needed, the highest ranked (last taken)
	// first.
	keep := make([]bool, chosen)
	for k := range keep {
		keep[k] = true
	}
	for k := chosen - 2; k >= 0; k-- {
		for _, u := range cands[k].uses {
			take(&proj[u.node], u)
		}
		if _, ok := refPlace(proj, j.Partition, j, quantum); ok {
			keep[k] = false
			continue
		}
		for _, u := range cands[k].uses {
			giveBack(&proj[u.node], u)
		}
	}
	g, _ := refPlace(proj, j.Partition, j, quantum)
	if p.pre.stopping == nil {
		p.pre.stopping, p.pre.waiting = map[uint64]bool{}, map[uint64]bool{}
	}
	p.pre.waiting[j.ID] = true
	var ids []uint64
	for k := 0; k < chosen; k++ {
		if !keep[k] {
			continue
		}
		r := cands[k].r
		p.pre.stopping[r.JobID] = true
		ids = append(ids, r.JobID)
		p.plan.Preemptions = append(p.plan.Preemptions, Preemption{Victim: r.JobID, By: j.ID, Mode: p.mode(r)})
	}
	p.blocked = true
	p.plan.setReason(j, reason.Preempting)
	p.hold(j, g, ids, quantum)
	return true
}

// hold reserves g for j from now: its victims' resources are expected
// back now, and backfill may use no more of g's nodes than j leaves.
// Without backfill the pass is strict from here: nobody else starts.
func (p *pass) hold(j *Job, g gangFit, victims []uint64, quantum float64) {
	if p.bf == nil {
		p.strict = true
		return
	}
	p.bf.stopping(victims)
	at, rg, ok := p.bf.reserve(j.Partition, j, walltime(j.Walltime), quantum)
	if !ok {
		at, rg = p.now.UnixNano(), g
	}
	p.plan.Starts = append(p.plan.Starts, StartEstimate{
		JobID: j.ID, Start: time.Unix(0, at).In(p.now.Location()), Nodes: p.c.names(rg.hosts),
	})
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
