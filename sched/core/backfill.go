package core

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// The backfill stage. A pass walks the queue in priority order; the first
// ReservationDepth jobs that do not fit now get a reservation: the
// earliest time, given the walltimes of what runs (and of what this pass
// started), at which they fit, and the nodes they would take then. Every
// later job may start now only where it delays no reservation: on a
// reserved node, a job that runs past the reservation's start may use no
// more than the reservation leaves there (its slack). With one
// reservation and one node this is textbook EASY: a job starts early if it
// ends by the head's shadow time or needs no more than the extra
// processors free then.
//
// Toward conservative: a later reservation treats earlier ones as holding
// their nodes from now until they end, so it never overlaps them.

// use is what one container holds on one node.
type use struct {
	node   int32
	res    Res
	shares []GPUShare
}

// event is resources coming back at a time (unix nanoseconds): node
// resources, and licenses.
type event struct {
	at   int64
	uses []use
	job  uint64 // the running job whose end it is; 0 for the pass's own
	lic  map[string]int
}

type slack struct {
	res Res
	dev []float64
}

type reservation struct {
	jobID      uint64
	start, end int64
	slack      map[int32]*slack
	// lic is the license slack: of each license the reserved job asks
	// for, what is left at its start that a job running past the start
	// may take.
	lic map[string]int
}

type backfill struct {
	c        *cluster
	gate     *gate // reservations; nil: none
	now      int64
	running  []event // from the snapshot, sorted by time
	placed   []event // this pass's placements and the reservations
	sorted   int     // placed[:sorted] is in time order (sortPlaced)
	resv     []reservation
	nodeResv [][]int32 // node → its reservations (indexes into resv)
	reserved []use     // what the reservations hold, for projections
	// stopped are the running jobs preempted in this pass; dirty: their
	// events are not yet moved to now (sortRunning).
	stopped map[uint64]bool
	dirty   bool
	// lic is the pass's free licenses (nil: none); reservedLic what the
	// reservations hold of them, for projections.
	lic         *licenses
	reservedLic map[string]int
	// seen stamps, per node, the step of earliest's walk that last
	// touched it (step): many events at one time (the jobs preempted,
	// all ending now) touch each node once, without a search.
	seen []uint32
	step uint32
}

func newBackfill(c *cluster, g *gate, s *Snapshot, now time.Time) *backfill {
	b := &backfill{c: c, gate: g, now: now.UnixNano()}
	// A reservation's end gives its nodes back to every job: an event
	// that frees nothing but has the nodes tried again.
	b.running = append(b.running, g.ends()...)
	for _, r := range s.Running {
		end := r.Start.Add(walltime(r.Walltime)).UnixNano()
		if r.StoppingFor != 0 && !r.Suspended {
			end = b.now // preempted: being stopped now
		}
		ev := event{at: max(end, b.now), job: r.JobID, lic: r.Licenses}
		for i, name := range r.Nodes {
			n, ok := c.byName[name]
			if !ok || i >= len(r.Containers) {
				continue
			}
			u := use{node: n, res: r.Containers[i]}
			if i < len(r.GPUs) {
				u.shares = r.GPUs[i]
			}
			ev.uses = append(ev.uses, u)
		}
		b.running = append(b.running, ev)
	}
	slices.SortStableFunc(b.running, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	return b
}

// stopping moves the ends of the running jobs ids to now: they were
// just preempted. The events are re-sorted when next walked (sortRunning).
func (b *backfill) stopping(ids []uint64) {
	if b.stopped == nil {
		b.stopped = map[uint64]bool{}
	}
	for _, id := range ids {
		b.stopped[id] = true
	}
	b.dirty = true
}

// addPlaced adds ev to the placed events; sortPlaced brings them back
// in time order (those of one time in the order added) when next walked.
func (b *backfill) addPlaced(ev event) {
	b.placed = append(b.placed, ev)
}

// sortPlaced sorts the events added since the last walk and merges them
// with the rest, already in order: each walk costs no more than a merge.
func (b *backfill) sortPlaced() {
	if b.sorted == len(b.placed) {
		return
	}
	cmpAt := func(a, b event) int { return cmp.Compare(a.at, b.at) }
	old, add := b.placed[:b.sorted], b.placed[b.sorted:]
	slices.SortStableFunc(add, cmpAt)
	if len(old) > 0 && old[len(old)-1].at > add[0].at {
		merged := make([]event, 0, len(b.placed))
		i, k := 0, 0
		for i < len(old) && k < len(add) {
			if add[k].at < old[i].at {
				merged = append(merged, add[k])
				k++
			} else {
				merged = append(merged, old[i])
				i++
			}
		}
		merged = append(append(merged, old[i:]...), add[k:]...)
		b.placed = merged
	}
	b.sorted = len(b.placed)
}

// sortRunning brings the events of jobs preempted in this pass to now
// and the events back in time order.
func (b *backfill) sortRunning() {
	if !b.dirty {
		return
	}
	early := false
	for i := range b.running {
		if b.stopped[b.running[i].job] {
			b.running[i].at = b.now
		}
		early = early || b.running[i].at < b.now
	}
	if early { // a window that ended before now: sort as it is
		slices.SortStableFunc(b.running, func(a, b event) int { return cmp.Compare(a.at, b.at) })
		b.dirty = false
		return
	}
	// Every event is at now or later and the moved ones came to now: a
	// stable partition, those at now first, is the stable sort.
	var later []event
	k := 0
	for _, ev := range b.running {
		if ev.at == b.now {
			b.running[k] = ev
			k++
		} else {
			later = append(later, ev)
		}
	}
	copy(b.running[k:], later)
	b.dirty = false
}

// hold reserves us for a job from now until end: after is what each of
// its nodes has once its victims are gone and it is placed, the slack a
// job started now may use there.
func (b *backfill) hold(jobID uint64, us []use, after map[int32]*nstate, end int64) {
	r := reservation{jobID: jobID, start: b.now, end: end, slack: map[int32]*slack{}}
	if b.nodeResv == nil {
		b.nodeResv = make([][]int32, len(b.c.nodes))
	}
	ri := int32(len(b.resv))
	for i, n := range after {
		r.slack[i] = &slack{res: n.free, dev: n.dev}
		b.nodeResv[i] = append(b.nodeResv[i], ri)
	}
	b.resv = append(b.resv, r)
	b.reserved = append(b.reserved, us...)
	b.addPlaced(event{at: end, uses: us})
}

// walltime is how long a job of walltime w is expected to run: w, the
// limit in force its caller resolved (Job.Walltime), or a year for a job
// without one.
func walltime(w time.Duration) time.Duration {
	if w > 0 {
		return w
	}
	return 365 * 24 * time.Hour
}

func gangUses(j *Job, g gangFit, c *cluster, quantum float64) []use {
	us := make([]use, len(g.hosts))
	for ci, h := range g.hosts {
		r := j.Containers[ci]
		u := use{node: h}
		if g.shares != nil {
			u.shares = g.shares[ci]
		}
		r.GPU = roundedGPU(r.GPU, quantum, c.nodes[h].dev != nil)
		u.res = r
		us[ci] = u
	}
	return us
}

// started records a job placed now that runs until end holding us and
// the licenses lic: they come back then, and it eats the slack of
// reservations it overlaps.
func (b *backfill) started(us []use, lic map[string]int, end int64) {
	b.addPlaced(event{at: end, uses: us, lic: lic})
	if len(lic) > 0 {
		b.startedLicenses(lic, end)
	}
	if len(b.resv) == 0 {
		return
	}
	for _, u := range us {
		for _, ri := range b.nodeResv[u.node] {
			r := &b.resv[ri]
			if r.start >= end {
				continue
			}
			s := r.slack[u.node]
			s.res = s.res.Sub(u.res)
			n := &b.c.nodes[u.node]
			for _, sh := range u.shares {
				if d := n.devIndex(sh.Device); d >= 0 && s.dev != nil {
					s.dev[d] -= sh.Share
				}
			}
		}
	}
}

// limit is what node i offers a job that would run until end: its free
// resources, capped by the slack of every reservation on it that starts
// before end.
func (b *backfill) limit(i int32, n *nstate, end int64) (Res, []float64) {
	free, dev := n.free, n.dev
	if len(b.nodeResv) == 0 || len(b.nodeResv[i]) == 0 {
		return free, dev
	}
	copied := false
	for _, ri := range b.nodeResv[i] {
		r := &b.resv[ri]
		if r.start >= end {
			continue
		}
		s := r.slack[i]
		free = minRes(free, s.res)
		if dev != nil && s.dev != nil {
			if !copied {
				dev = append([]float64(nil), dev...)
				copied = true
			}
			for d := range dev {
				dev[d] = math.Min(dev[d], s.dev[d])
			}
		}
	}
	return free, dev
}

func minRes(a, b Res) Res {
	return Res{min(a.CPUMilli, b.CPUMilli), min(a.Memory, b.Memory), math.Min(a.GPU, b.GPU)}
}

// project is a copy of the pass's nodes with the reservations taken out.
func (b *backfill) project() []nstate {
	proj := make([]nstate, len(b.c.nodes))
	copy(proj, b.c.nodes)
	for i := range proj {
		if proj[i].dev != nil {
			proj[i].dev = append([]float64(nil), proj[i].dev...)
		}
	}
	for _, u := range b.reserved {
		n := &proj[u.node]
		n.free = n.free.Sub(u.res)
		takeShares(n, u.shares)
	}
	return proj
}

func giveBack(n *nstate, u use) {
	n.free = n.free.Add(u.res)
	for _, sh := range u.shares {
		if d := n.devIndex(sh.Device); d >= 0 {
			n.dev[d] = math.Min(1, n.dev[d]+sh.Share)
		}
	}
}

// reserve finds the earliest time j fits, given when resources come back,
// and reserves the nodes it would take then for w. It reports false when
// j fits nowhere even once everything known has ended.
func (b *backfill) reserve(part string, j *Job, w time.Duration, quantum float64) (int64, gangFit, bool) {
	b.sortRunning()
	proj := b.project()
	b.sortPlaced()
	placed := b.placed
	var lic map[string]int // nil: j asks for none, none is counted
	if len(j.Licenses) > 0 {
		lic = b.licenseProjection()
	}
	at, g, ok := b.earliest(proj, lic, part, j, w, quantum, placed)
	if !ok {
		return 0, gangFit{}, false
	}
	r := reservation{jobID: j.ID, start: at, end: at + int64(w), slack: map[int32]*slack{}}
	if len(j.Licenses) > 0 {
		r.lic = map[string]int{}
		if b.reservedLic == nil {
			b.reservedLic = map[string]int{}
		}
		for name, n := range j.Licenses {
			r.lic[name] = lic[name] - n
			b.reservedLic[name] += n
		}
	}
	us := gangUses(j, g, b.c, quantum)
	for _, u := range us {
		n := &proj[u.node]
		n.free = n.free.Sub(u.res)
		takeShares(n, u.shares)
	}
	if b.nodeResv == nil {
		b.nodeResv = make([][]int32, len(b.c.nodes))
	}
	ri := int32(len(b.resv))
	for _, u := range us {
		if _, ok := r.slack[u.node]; ok {
			continue
		}
		n := &proj[u.node]
		r.slack[u.node] = &slack{res: n.free, dev: n.dev}
		b.nodeResv[u.node] = append(b.nodeResv[u.node], ri)
	}
	b.resv = append(b.resv, r)
	b.reserved = append(b.reserved, us...)
	b.addPlaced(event{at: r.end, uses: us, lic: j.Licenses})
	return at, g, true
}

// earliest walks the events in time order over the projection until j
// fits. Single-node jobs re-test only the nodes that changed; multi-node
// ones run the full placement once the sum of what every node could hold
// reaches the gang's size. lic is the licenses' projection (nil when j
// asks for none): j fits only once it covers j's licenses (the time they
// come free tests every node); earliest leaves it as it is at the time
// answered. The reservations' gate opens to j, for its walltime w, the
// nodes no window of another holds from the time tried.
func (b *backfill) earliest(proj []nstate, lic map[string]int, part string, j *Job, w time.Duration, quantum float64, placed []event) (int64, gangFit, bool) {
	own := b.gate.own(j)
	var at int64 // the time tried; the gate opens nodes by it
	var open func(int32) bool
	if b.gate != nil {
		open = func(i int32) bool { return b.gate.open(i, own, at, at+int64(w)) }
	}
	at = b.now
	licOK := covers(lic, j.Licenses)
	if licOK {
		if g, ok := refPlace(proj, part, j, quantum, open); ok {
			return b.now, g, true
		}
	}
	cs := j.Containers
	gpuOnly := allGPU(cs)
	cand := func(i int32) bool {
		return proj[i].inPartition(part) && (!gpuOnly || proj[i].hasGPU()) && (open == nil || open(i)) && !slices.Contains(j.Exclude, proj[i].name)
	}
	multi := j.Mode == ModeMultiNode
	var unit Res
	var k []int
	total := 0
	if multi {
		unit = minEach(cs)
		k = make([]int, len(proj))
		for i := range proj {
			if cand(int32(i)) {
				k[i] = holds(&proj[i], unit, len(cs))
				total += k[i]
			}
		}
	}
	left := make([]int, len(cs))
	for i := range left {
		left[i] = i
	}
	var touched []int32
	ri, pi := 0, 0
	for ri < len(b.running) || pi < len(placed) {
		switch {
		case pi >= len(placed) || (ri < len(b.running) && b.running[ri].at <= placed[pi].at):
			at = b.running[ri].at
		default:
			at = placed[pi].at
		}
		touched = touched[:0]
		b.nextStep(len(proj))
		for ri < len(b.running) && b.running[ri].at == at {
			touched = b.applyEvent(proj, b.running[ri], touched)
			if lic != nil {
				addCounts(lic, b.running[ri].lic)
			}
			ri++
		}
		for pi < len(placed) && placed[pi].at == at {
			touched = b.applyEvent(proj, placed[pi], touched)
			if lic != nil {
				addCounts(lic, placed[pi].lic)
			}
			pi++
		}
		if multi {
			for _, i := range touched {
				if cand(i) {
					total -= k[i]
					k[i] = holds(&proj[i], unit, len(cs))
					total += k[i]
				}
			}
		}
		if !licOK {
			if licOK = covers(lic, j.Licenses); !licOK {
				continue
			}
			// The licenses came free now: any node may fit, changed or not.
			if g, ok := refPlace(proj, part, j, quantum, open); ok {
				return at, g, true
			}
			continue
		}
		if multi {
			if total >= len(cs) {
				if g, ok := refPlace(proj, part, j, quantum, open); ok {
					return at, g, true
				}
			}
			continue
		}
		best, bestF := int32(-1), nodeFit{}
		for _, i := range touched {
			n := &proj[i]
			if !cand(i) || (best >= 0 && !keyLess(n.key(i, gpuOnly), proj[best].key(best, gpuOnly))) {
				continue
			}
			if f := fill(n.free, n.dev, n.devID, cs, left, quantum, true); len(f.taken) == len(cs) {
				best, bestF = i, f
			}
		}
		if best >= 0 {
			g := gangFit{hosts: make([]int32, len(cs))}
			g.assign(best, bestF, len(cs))
			return at, g, true
		}
	}
	return 0, gangFit{}, false
}

// applyEvent gives ev's resources back in proj, adding to touched the
// nodes not yet touched in this step.
func (b *backfill) applyEvent(proj []nstate, ev event, touched []int32) []int32 {
	for _, u := range ev.uses {
		giveBack(&proj[u.node], u)
		if b.seen[u.node] != b.step {
			b.seen[u.node] = b.step
			touched = append(touched, u.node)
		}
	}
	return touched
}

// nextStep starts a step of earliest's walk over n nodes: none touched.
func (b *backfill) nextStep(n int) {
	if len(b.seen) != n {
		b.seen, b.step = make([]uint32, n), 0
	}
	b.step++
	if b.step == 0 { // wrapped: clear the old stamps
		clear(b.seen)
		b.step = 1
	}
}

// minEach is the smallest request of the gang in each resource.
func minEach(cs []Res) Res {
	m := cs[0]
	for _, c := range cs[1:] {
		m = minRes(m, c)
	}
	return m
}

// holds bounds how many containers of size unit node n could take.
func holds(n *nstate, unit Res, most int) int {
	h := most
	if unit.CPUMilli > 0 {
		h = min(h, int(max(0, n.free.CPUMilli/unit.CPUMilli)))
	}
	if unit.Memory > 0 {
		h = min(h, int(max(0, n.free.Memory/unit.Memory)))
	}
	if unit.GPU > gpuEps {
		h = min(h, int(math.Max(0, (n.free.GPU+gpuEps)/unit.GPU)))
	}
	return h
}
