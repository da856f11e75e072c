package sched

import (
	"cmp"
	"container/heap"
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
	// (held), with a dependency (deps), in a site reservation (resv);
	// and job arrays' own rows (arrays), for their throttles.
	held, deps, resv, arrays map[uint64]*state.Job
	// kept are the grouped jobs whose reason keeps a reservation.
	kept map[uint64]*state.Job
	// users counts the queued jobs of each user (fair share's users).
	users map[string]int
	// cfg is the config whose partition limits every grouped job was
	// checked against; breach, those outside them not yet told so.
	cfg    *partition.Config
	breach []*state.Job
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
	b.held, b.deps, b.resv, b.arrays = map[uint64]*state.Job{}, map[uint64]*state.Job{}, map[uint64]*state.Job{}, map[uint64]*state.Job{}
	b.kept = map[uint64]*state.Job{}
	b.users = map[string]int{}
	b.cfg, b.breach = nil, nil
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
	case grouped:
		k := keyOf(j)
		g := b.groups[k]
		if g == nil {
			g = &group{key: k}
			b.groups[k] = g
		}
		g.add(j)
		if j.Reason == reason.Resources || j.Reason == reason.Preempting {
			b.kept[j.ID] = j
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
	case grouped:
		k := keyOf(j)
		if g := b.groups[k]; g != nil {
			g.remove(j)
			if g.live() == 0 {
				delete(b.groups, k)
			}
		}
		delete(b.kept, j.ID)
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
	ok      bool
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
	rk := core.NewRanker(&core.Snapshot{Nodes: empty, Partitions: snap.Partitions, QOS: snap.QOS, Policy: snap.Policy})
	b.last = rankBase{rk: rk, now: now, w: snap.Policy.Weights, factors: factors, ok: true}
	for _, g := range b.groups {
		g.tmpl = core.Job{Partition: g.key.part, QOS: g.key.qos, User: g.key.user, Account: g.key.account,
			Containers: []core.Res{{CPUMilli: g.key.cpu}}, Nice: g.key.nice, FairShare: jobFactor(factors, g.key.account, g.key.user)}
	}
	if cfg != b.cfg {
		b.checkLimits(cfg, &snap)
	}
	jobs := make([]*state.Job, 0, len(started)+len(b.held)+len(b.deps)+len(b.resv)+len(b.arrays))
	for _, j := range started {
		if j.Array == nil {
			jobs = append(jobs, j)
		}
	}
	for _, m := range []map[uint64]*state.Job{b.held, b.deps, b.resv, b.arrays} {
		for _, j := range m {
			jobs = append(jobs, j)
		}
	}
	jobs = append(jobs, b.pick(cfg, &snap, now)...)
	slices.SortFunc(jobs, func(a, c *state.Job) int { return cmp.Compare(a.ID, c.ID) })
	jobs = slices.CompactFunc(jobs, func(a, c *state.Job) bool { return a.ID == c.ID })
	fillSnapshot(&snap, v, cfg, empty, jobs, factors, now)
	return snap
}

// checkLimits finds the grouped jobs outside their partition's limits
// in cfg (a new config): those not yet told so go to the next pass,
// where the core gives them PartitionLimit.
func (b *backlog) checkLimits(cfg *partition.Config, snap *core.Snapshot) {
	b.cfg, b.breach = cfg, nil
	for _, g := range b.groups {
		lim, known := snap.Partitions[g.key.part]
		if !known {
			lim = core.Partition{Jobs: core.JobLimits{Closed: true}}
		}
		if lim.Jobs.Closed || lim.Jobs.MaxSize > 0 || lim.Jobs.MaxWalltime > 0 || len(lim.Jobs.Modes) > 0 || len(lim.Jobs.Accounts) > 0 {
			for _, s := range g.slots {
				if s.j != nil && s.j.Reason != reason.PartitionLimit && b.breaches(cfg, snap, s.j) {
					b.breach = append(b.breach, s.j)
				}
			}
		}
	}
}

// breaches reports whether j is outside its partition's limits.
func (b *backlog) breaches(cfg *partition.Config, snap *core.Snapshot, j *state.Job) bool {
	p, known := snap.Partitions[j.Partition]
	if !known {
		return true
	}
	if p.Jobs.Closed || (p.Jobs.MaxSize == 0 && p.Jobs.MaxWalltime == 0 && len(p.Jobs.Modes) == 0 && len(p.Jobs.Accounts) == 0) {
		return p.Jobs.Closed
	}
	cj := coreJob(j)
	if cfg.HasTree() {
		cj.Accounts = cfg.AccountPath(j.Account)
	}
	return p.Jobs.Breaches(&cj) != 0
}

// pick chooses the grouped jobs a pass gives the core: with depth d
// (the policy's QueueDepth), every one that keeps a reservation, the d
// oldest past their starvation threshold, the d+1 first by priority
// past the threshold (each counting only the jobs the core would try: a
// job outside its partition's limits that already says so is passed
// over), and those
// checkLimits found outside their limits. Without a depth, all.
func (b *backlog) pick(cfg *partition.Config, snap *core.Snapshot, now time.Time) []*state.Job {
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
	for _, j := range b.breach {
		out = append(out, j)
	}
	b.breach = nil
	// tryable: whether the core would try j, and whether to pass it on.
	tryable := func(j *state.Job) (counts, give bool) {
		if !b.breaches(cfg, snap, j) {
			return true, true
		}
		return false, j.Reason != reason.PartitionLimit
	}
	rk := &b.last.rk
	if snap.Policy.ReservationDepth > 0 {
		// The oldest past their threshold, across the groups whose
		// partition has one: each group's are its first. The core
		// orders them so, equal submit times by priority, then id.
		h := &heads{less: func(a, c *head) bool {
			return a.s.sub < c.s.sub || a.s.sub == c.s.sub && (a.p > c.p || a.p == c.p && a.s.id < c.s.id)
		}}
		for _, g := range b.groups {
			if t := core.StarvationAge(snap, g.key.part); t > 0 {
				h.push(g, 0, now.Add(-t).UnixNano(), rk, now)
			}
		}
		n := 0
		for h.Len() > 0 && n < d {
			top := h.pop()
			if j := top.s.j; !taken[j.ID] {
				taken[j.ID] = true
				counts, give := tryable(j)
				if counts {
					n++
				}
				if give {
					out = append(out, j)
				}
			}
			h.push(top.g, top.i+1, top.limit, rk, now)
		}
	}
	// The first d+1 by priority (ties by id), a merge of the groups'
	// heads.
	// A group's jobs past the threshold, its first, are not in it: the
	// core puts them before the priority order (the oldest d of them
	// were taken above).
	h := &heads{less: func(a, c *head) bool { return a.p > c.p || a.p == c.p && a.s.id < c.s.id }}
	for _, g := range b.groups {
		from := 0
		if snap.Policy.ReservationDepth > 0 {
			if t := core.StarvationAge(snap, g.key.part); t > 0 {
				limit := now.Add(-t).UnixNano()
				from = sort.Search(len(g.slots), func(i int) bool { return g.slots[i].sub > limit })
			}
		}
		h.push(g, from, 1<<63-1, rk, now)
	}
	n := 0
	for h.Len() > 0 && n <= d {
		top := h.pop()
		if j := top.s.j; !taken[j.ID] {
			taken[j.ID] = true
			counts, give := tryable(j)
			if counts {
				n++
			}
			if give {
				out = append(out, j)
			}
		}
		h.push(top.g, top.i+1, top.limit, rk, now)
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
// then those that wait for a dependency, by priority. Held jobs have
// none.
func (b *backlog) rank(j *state.Job) (rank, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.ok || !b.ready {
		return rank{}, false
	}
	at := placeOf(j)
	if at != grouped && at != depJob && at != resvJob {
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
	waiting := func(o *state.Job) bool {
		return o.Reason == reason.Dependency || o.Reason == reason.DependencyNeverSatisfied
	}
	mine := at == depJob && waiting(j) // j comes after the jobs the core considers
	first, later := 0, 0               // jobs of the partition before the dependencies, after
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
	for _, m := range []map[uint64]*state.Job{b.deps, b.resv} {
		for _, o := range m {
			if o.Partition != j.Partition {
				continue
			}
			late := waiting(o)
			if late {
				later++
			} else {
				first++
			}
			switch {
			case o.ID == j.ID:
			case late == mine && ahead(o):
				pos++
			case !late && mine:
				pos++
			}
		}
	}
	r.pos, r.len = pos+1, first+later
	return r, true
}
