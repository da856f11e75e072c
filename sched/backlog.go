package sched

import (
	"cmp"
	"container/heap"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/reason"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/partition"
	"github.com/troupe-hpc/troupe/sched/state"
)

// backlog is the leader's queue of waiting jobs, kept between passes
// and brought up to date from the state's change feed
// (state.Store.SnapshotChanges), so that a pass costs what changed and
// what it tries, not the backlog:
//
//   - the pending jobs are kept in groups that rank alike (partition,
//     QOS, account, user, CPUs, nice: every priority factor but age),
//     each in submit order, which is its priority order whatever the
//     time, the weights or the fair-share factors;
//   - a pass gives the core (coreSnapshot's input, trimmed) the jobs it
//     can try under core.Policy.QueueDepth: those that keep a
//     reservation, the oldest past their starvation threshold, the
//     first by priority (a merge of the groups' heads), and the few the
//     groups do not hold (held, with a dependency, in a reservation);
//     the core's plan is then the one it makes with every job, the
//     others keeping their reason;
//   - a job's queue position (bqueue) is worked out when it is read,
//     counting in each group of its partition by binary search.
type backlog struct {
	mu     sync.Mutex
	ready  bool
	groups map[groupKey]*group
	// The waiting jobs the groups do not hold, by id: held or adopting
	// (held), with a dependency (deps), in a site reservation (resv),
	// told they are outside their partition's limits (limited); and job
	// arrays' own rows (arrays), for their throttles.
	held, deps, resv, limited, arrays map[uint64]*state.Job
	// kept are the grouped jobs whose reason keeps a reservation.
	kept map[uint64]*state.Job
	// users counts the queued jobs of each user (fair share's users).
	users map[string]int
	// cfg is the config whose partition limits (parts) every grouped job
	// was checked against; breach, those outside them not yet told so,
	// which every pass gives the core until it has.
	cfg    *partition.Config
	parts  map[string]core.Partition
	breach map[uint64]*state.Job
	// last is what the last pass ranked with, for the positions.
	last rankBase
}

// groupKey is what ranks jobs alike but for their age.
type groupKey struct {
	part, qos, account, user string
	cpu                      int64
	nice                     float64
}

// slot is one job of a group; j nil: taken out (counted in dead).
type slot struct {
	sub int64 // submit time, unix nanoseconds
	id  uint64
	j   *state.Job
}

func (s slot) before(sub int64, id uint64) bool {
	return s.sub < sub || s.sub == sub && s.id < id
}

// group is the jobs of one groupKey in submit order (then id).
type group struct {
	key   groupKey
	slots []slot
	dead  int
	tmpl  core.Job // the key as the core ranks it, without Submit
}

func (g *group) live() int { return len(g.slots) - g.dead }

func (g *group) find(sub int64, id uint64) int {
	return sort.Search(len(g.slots), func(i int) bool { return !g.slots[i].before(sub, id) })
}

func (g *group) add(j *state.Job) {
	sub := j.Submitted.UnixNano()
	n := len(g.slots)
	if n == 0 || g.slots[n-1].before(sub, j.ID) {
		g.slots = append(g.slots, slot{sub, j.ID, j})
		return
	}
	i := g.find(sub, j.ID)
	if i < n && g.slots[i].sub == sub && g.slots[i].id == j.ID {
		if g.slots[i].j == nil {
			g.dead--
		}
		g.slots[i].j = j
		return
	}
	g.slots = slices.Insert(g.slots, i, slot{sub, j.ID, j})
}

func (g *group) remove(j *state.Job) {
	i := g.find(j.Submitted.UnixNano(), j.ID)
	if i == len(g.slots) || g.slots[i].id != j.ID || g.slots[i].j == nil {
		return
	}
	g.slots[i].j = nil
	g.dead++
	if g.dead > 64 && g.dead*2 > len(g.slots) {
		g.compact()
	}
}

// compact drops the slots taken out.
func (g *group) compact() {
	if g.dead == 0 {
		return
	}
	g.slots = slices.DeleteFunc(g.slots, func(s slot) bool { return s.j == nil })
	g.dead = 0
}

// where a job is kept in the backlog.
type where uint8

const (
	nowhere where = iota
	grouped
	heldJob
	depJob
	resvJob
	limitedJob
	arrayRow
)

func placeOf(j *state.Job) where {
	switch {
	case j == nil || j.State.Terminal():
		return nowhere
	case j.Array != nil:
		return arrayRow
	case j.State == api.JobHeld || j.Adopting():
		return heldJob
	case j.State != api.JobPending:
		return nowhere
	case j.DependsOn != nil:
		return depJob
	case j.Reservation != "":
		return resvJob
	case j.Reason == reason.PartitionLimit:
		return limitedJob
	}
	return grouped
}

func keyOf(j *state.Job) groupKey {
	k := groupKey{part: j.Partition, qos: j.QOS, account: j.Account, user: j.User}
	for _, c := range j.Containers {
		k.cpu += c.Res().CPUMilli
	}
	if j.Spec.Priority < 0 {
		k.nice = float64(-j.Spec.Priority)
	}
	return k
}

// reset empties b.
func (b *backlog) reset() {
	b.groups = map[groupKey]*group{}
	b.held, b.deps, b.resv, b.limited, b.arrays = map[uint64]*state.Job{}, map[uint64]*state.Job{}, map[uint64]*state.Job{}, map[uint64]*state.Job{}, map[uint64]*state.Job{}
	b.kept = map[uint64]*state.Job{}
	b.users = map[string]int{}
	b.cfg, b.parts, b.breach = nil, nil, map[uint64]*state.Job{}
	b.ready = true
}

// update brings b to v: changes are the jobs' changes since the last
// update, or with whole, unknown (every job of v is read).
func (b *backlog) update(v *state.Snapshot, changes []state.JobChange, whole bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if whole || !b.ready {
		b.reset()
		for _, j := range v.LiveJobs() {
			b.add(j)
		}
		return
	}
	for _, c := range changes {
		b.remove(c.Before)
		b.add(c.After)
	}
}

// queued reports whether j counts among its user's queued jobs.
func queued(j *state.Job) bool { return j.State == api.JobPending && j.Array == nil }

func (b *backlog) add(j *state.Job) {
	switch placeOf(j) {
	case nowhere:
		return
	case arrayRow:
		b.arrays[j.ID] = j
		return
	case heldJob:
		b.held[j.ID] = j
	case depJob:
		b.deps[j.ID] = j
	case resvJob:
		b.resv[j.ID] = j
	case limitedJob:
		b.limited[j.ID] = j
	case grouped:
		k := keyOf(j)
		g := b.groups[k]
		if g == nil {
			g = &group{key: k}
			b.template(g)
			b.groups[k] = g
		}
		g.add(j)
		if j.Reason == reason.Resources || j.Reason == reason.Preempting {
			b.kept[j.ID] = j
		}
		if b.cfg != nil && b.breaches(j) {
			b.breach[j.ID] = j
		}
	}
	if queued(j) {
		b.users[j.User]++
	}
}

func (b *backlog) remove(j *state.Job) {
	switch placeOf(j) {
	case nowhere:
		return
	case arrayRow:
		delete(b.arrays, j.ID)
		return
	case heldJob:
		delete(b.held, j.ID)
	case depJob:
		delete(b.deps, j.ID)
	case resvJob:
		delete(b.resv, j.ID)
	case limitedJob:
		delete(b.limited, j.ID)
	case grouped:
		k := keyOf(j)
		if g := b.groups[k]; g != nil {
			g.remove(j)
			if g.live() == 0 {
				delete(b.groups, k)
			}
		}
		delete(b.kept, j.ID)
		delete(b.breach, j.ID)
	}
	if queued(j) {
		if b.users[j.User]--; b.users[j.User] <= 0 {
			delete(b.users, j.User)
		}
	}
}

// rankBase is what one pass ranked with: the positions read later are
// worked out with it.
type rankBase struct {
	rk      core.Ranker
	now     time.Time
	w       core.Weights
	factors map[string]float64 // fair share, by account/user
	// waits are the jobs with a dependency the core keeps out of its
	// order (not met, or never to be).
	waits map[uint64]bool
	ok    bool
}

// snapshot is the core's input for a pass at now over the state v the
// backlog was last updated to: coreSnapshot's, with only the waiting
// jobs the core can try under the policy's QueueDepth (all of them
// without one).
func (b *backlog) snapshot(v *state.Snapshot, empty []core.Node, now time.Time) core.Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	cfg := v.Config()
	started := v.JobsIn(api.JobScheduled, api.JobPreparing, api.JobRunning)
	users := make([]string, 0, len(b.users))
	for u := range b.users {
		users = append(users, u)
	}
	sort.Strings(users)
	_, factors := fairShare(cfg, v.Usage(), users)
	snap := snapshotFrame(v, cfg)
	// The ranker keeps its own maps: the caller may change the snapshot's
	// (noPreemption) while a view reads a position.
	rk := core.NewRanker(&core.Snapshot{Nodes: empty, Partitions: maps.Clone(snap.Partitions), QOS: maps.Clone(snap.QOS), Policy: snap.Policy})
	b.last = rankBase{rk: rk, now: now, w: snap.Policy.Weights, factors: factors, ok: true}
	for _, g := range b.groups {
		b.template(g)
	}
	if cfg != b.cfg {
		b.checkLimits(cfg, &snap)
	}
	jobs := make([]*state.Job, 0, len(started)+len(b.held)+len(b.deps)+len(b.resv)+len(b.limited)+len(b.arrays)+len(b.breach))
	for _, j := range started {
		if j.Array == nil {
			jobs = append(jobs, j)
		}
	}
	for _, m := range []map[uint64]*state.Job{b.held, b.deps, b.resv, b.limited, b.arrays, b.breach} {
		for _, j := range m {
			jobs = append(jobs, j)
		}
	}
	jobs = append(jobs, b.pick(&snap, now)...)
	slices.SortFunc(jobs, func(a, c *state.Job) int { return cmp.Compare(a.ID, c.ID) })
	jobs = slices.CompactFunc(jobs, func(a, c *state.Job) bool { return a.ID == c.ID })
	fillSnapshot(&snap, v, cfg, empty, jobs, factors, now)
	b.last.waits = map[uint64]bool{}
	for i := range snap.Queue {
		if d := snap.Queue[i].Depends; d != nil && d.Reason(snap.Named) != "" {
			b.last.waits[snap.Queue[i].ID] = true
		}
	}
	return snap
}

// template sets g's job as the last pass ranks it (its fair share).
func (b *backlog) template(g *group) {
	g.tmpl = core.Job{Partition: g.key.part, QOS: g.key.qos, User: g.key.user, Account: g.key.account,
		Containers: []core.Res{{CPUMilli: g.key.cpu}}, Nice: g.key.nice, FairShare: jobFactor(b.last.factors, g.key.account, g.key.user)}
}

// checkLimits finds the grouped jobs outside their partition's limits
// in cfg (a new config): they go to the core (breach) until it has told
// them so.
func (b *backlog) checkLimits(cfg *partition.Config, snap *core.Snapshot) {
	b.cfg, b.parts, b.breach = cfg, maps.Clone(snap.Partitions), map[uint64]*state.Job{}
	for _, g := range b.groups {
		if !b.limits(g.key.part) {
			continue
		}
		for _, s := range g.slots {
			if s.j != nil && b.breaches(s.j) {
				b.breach[s.j.ID] = s.j
			}
		}
	}
}

// limits reports whether partition part limits its jobs (a partition
// the config does not have takes none).
func (b *backlog) limits(part string) bool {
	p, known := b.parts[part]
	l := &p.Jobs
	return !known || l.Closed || l.MaxSize > 0 || l.MaxWalltime > 0 || len(l.Modes) > 0 || len(l.Accounts) > 0
}

// breaches reports whether j is outside its partition's limits, as the
// core's eligible stage decides.
func (b *backlog) breaches(j *state.Job) bool {
	if !b.limits(j.Partition) {
		return false
	}
	p, known := b.parts[j.Partition]
	if !known {
		return true
	}
	cj := coreJob(j)
	if b.cfg.HasTree() {
		cj.Accounts = b.cfg.AccountPath(j.Account)
	}
	return p.Jobs.Breaches(&cj) != 0
}

// pick chooses the grouped jobs a pass gives the core: with depth d
// (the policy's QueueDepth), every one that keeps a reservation, and of
// each partition the d oldest past its starvation threshold and the d+1
// first by priority not past it (each counting only the jobs the core
// would try: those outside their limits go to the core apart, breach).
// Without a depth, all.
func (b *backlog) pick(snap *core.Snapshot, now time.Time) []*state.Job {
	d := snap.Policy.QueueDepth
	var out []*state.Job
	if d <= 0 {
		for _, g := range b.groups {
			for _, s := range g.slots {
				if s.j != nil {
					out = append(out, s.j)
				}
			}
		}
		return out
	}
	taken := make(map[uint64]bool, len(b.kept)+2*d+2)
	for id, j := range b.kept {
		taken[id] = true
		out = append(out, j)
	}
	parts := map[string][]*group{}
	for _, g := range b.groups {
		parts[g.key.part] = append(parts[g.key.part], g)
	}
	for part, groups := range parts {
		var from []int
		if t := core.StarvationAge(snap, part); snap.Policy.ReservationDepth > 0 && t > 0 {
			limit := now.Add(-t).UnixNano()
			from = make([]int, len(groups))
			// The oldest past the threshold, each group's first. The
			// core orders them so, equal submit times by priority, then
			// id.
			h := &heads{less: func(a, c *head) bool {
				return a.s.sub < c.s.sub || a.s.sub == c.s.sub && (a.p > c.p || a.p == c.p && a.s.id < c.s.id)
			}}
			for k, g := range groups {
				from[k] = sort.Search(len(g.slots), func(i int) bool { return g.slots[i].sub > limit })
				h.push(g, 0, limit, &b.last.rk, now)
			}
			out = b.merge(h, d, taken, out, now)
		}
		// The first d+1 by priority (ties by id), from each group's
		// first job not past the threshold: the core puts those before
		// the priority order (the oldest d of them were taken above).
		h := &heads{less: func(a, c *head) bool { return a.p > c.p || a.p == c.p && a.s.id < c.s.id }}
		for k, g := range groups {
			i := 0
			if from != nil {
				i = from[k]
			}
			h.push(g, i, 1<<63-1, &b.last.rk, now)
		}
		out = b.merge(h, d+1, taken, out, now)
	}
	return out
}

// merge appends to out the first jobs of the heads h until n of them
// are ones the core would try (those outside their limits are given it
// apart, in breach), each once (taken).
func (b *backlog) merge(h *heads, n int, taken map[uint64]bool, out []*state.Job, now time.Time) []*state.Job {
	for tried := 0; h.Len() > 0 && tried < n; {
		top := h.pop()
		if j := top.s.j; !taken[j.ID] {
			taken[j.ID] = true
			if b.breach[j.ID] == nil {
				tried++
				out = append(out, j)
			}
		}
		h.push(top.g, top.i+1, top.limit, &b.last.rk, now)
	}
	return out
}

// head is a group's first job not yet merged: slot i of g.
type head struct {
	g     *group
	i     int
	s     slot
	p     float64 // its priority, when merging by priority
	limit int64   // merge only jobs submitted up to this
}

// heads is a heap of groups' heads.
type heads struct {
	hs   []*head
	less func(a, c *head) bool
}

func (h *heads) Len() int           { return len(h.hs) }
func (h *heads) Less(i, k int) bool { return h.less(h.hs[i], h.hs[k]) }
func (h *heads) Swap(i, k int)      { h.hs[i], h.hs[k] = h.hs[k], h.hs[i] }
func (h *heads) Push(x any)         { h.hs = append(h.hs, x.(*head)) }
func (h *heads) Pop() any {
	x := h.hs[len(h.hs)-1]
	h.hs = h.hs[:len(h.hs)-1]
	return x
}
func (h *heads) pop() *head { return heap.Pop(h).(*head) }

// push adds g's first live slot from i on submitted up to limit, with
// its priority at now when rk is set.
func (h *heads) push(g *group, i int, limit int64, rk *core.Ranker, now time.Time) {
	for i < len(g.slots) && g.slots[i].j == nil {
		i++
	}
	if i == len(g.slots) || g.slots[i].sub > limit {
		return
	}
	hd := &head{g: g, i: i, s: g.slots[i], limit: limit}
	if rk != nil {
		hd.p = slotPriority(rk, g, g.slots[i].sub, now)
	}
	heap.Push(h, hd)
}

// slotPriority is the priority of g's job submitted at sub.
func slotPriority(rk *core.Ranker, g *group, sub int64, now time.Time) float64 {
	j := g.tmpl
	j.Submit = time.Unix(0, sub)
	return rk.Priority(&j, now)
}

// rank is j's priority and queue position as of the last pass, if it
// waits and a pass has ranked: its position among the waiting jobs of
// its partition, those the core may consider by priority (ties by id),
// then those it keeps out (waiting for a dependency, outside their
// partition's limits), by priority. Held jobs have none.
func (b *backlog) rank(j *state.Job) (rank, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.ok || !b.ready {
		return rank{}, false
	}
	at := placeOf(j)
	if at != grouped && at != depJob && at != resvJob && at != limitedJob {
		return rank{}, false
	}
	rb := &b.last
	cj := coreJob(j)
	cj.FairShare = jobFactor(rb.factors, j.Account, j.User)
	f := rb.rk.Factors(&cj, rb.now)
	p := rb.rk.Priority(&cj, rb.now)
	w := rb.w
	r := rank{factors: api.PriorityFactors{
		Age: w.Age * f.Age, FairShare: w.FairShare * f.FairShare, JobSize: w.JobSize * f.JobSize,
		Partition: w.Partition * f.Partition, Nice: -f.Nice, Total: f.Priority,
	}}
	ahead := func(o *state.Job) bool {
		oj := coreJob(o)
		oj.FairShare = jobFactor(rb.factors, o.Account, o.User)
		op := rb.rk.Priority(&oj, rb.now)
		return op > p || op == p && o.ID < j.ID
	}
	// keptOut: the core keeps o out of its order.
	keptOut := func(o *state.Job, at where) bool {
		if at == grouped {
			return b.breach[o.ID] != nil
		}
		return at == depJob && rb.waits[o.ID] || b.breaches(o)
	}
	mine := keptOut(j, at)
	first, later := 0, 0 // the partition's jobs the core considers, and those it keeps out
	pos := 0
	for _, g := range b.groups {
		if g.key.part != j.Partition {
			continue
		}
		g.compact()
		first += len(g.slots)
		if mine {
			pos += len(g.slots)
			continue
		}
		pos += sort.Search(len(g.slots), func(i int) bool {
			s := g.slots[i]
			sp := slotPriority(&rb.rk, g, s.sub, rb.now)
			return !(sp > p || sp == p && s.id < j.ID)
		})
	}
	// The grouped jobs outside their limits, counted above as
	// considered, are kept out.
	for _, o := range b.breach {
		if o.Partition != j.Partition {
			continue
		}
		first--
		later++
		switch {
		case o.ID == j.ID:
		case !mine && ahead(o):
			pos--
		case mine && !ahead(o):
			pos--
		}
	}
	for _, set := range []struct {
		m  map[uint64]*state.Job
		at where
	}{{b.deps, depJob}, {b.resv, resvJob}, {b.limited, limitedJob}} {
		for _, o := range set.m {
			if o.Partition != j.Partition {
				continue
			}
			out := keptOut(o, set.at)
			if out {
				later++
			} else {
				first++
			}
			switch {
			case o.ID == j.ID:
			case out == mine && ahead(o):
				pos++
			case !out && mine:
				pos++
			}
		}
	}
	r.pos, r.len = pos+1, first+later
	return r, true
}
