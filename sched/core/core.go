// Package core is the scheduler's pure heart: given a snapshot of the
// cluster and the time, it returns a plan. It has no clock, no I/O, no
// global state and no randomness, so schedd and the simulator (bsim) run
// the very same code and tests can replay it step by step.
//
//	Snapshot{Nodes, Queue, Running, Partitions, Named, ArraySlots, Policy}, now
//	   │
//	   ▼
//	eligible (eligible.go), each job once: held ──► Held; its dependency
//	   (Job.Depends, decided from Snapshot.Named) ──► Dependency or
//	   DependencyNeverSatisfied; its partition does not take it
//	   (Partition.Jobs: closed, walltime, size, mode, account) ──►
//	   PartitionLimit. Such a job is skipped: not ranked, blocks nobody.
//	   ▼
//	priority (priority.go): age, fair share, job size, partition tier,
//	   nice ──► eligible jobs in priority order (queue order on ties)
//	   ▼ for each job, highest first:
//	limits (limits.go): its array's throttle (ArraySlots) ──►
//	   JobArrayTaskLimit; its user's running jobs in its partition with
//	   it would pass Partition.UserLimits ──► AccountLimit; either way
//	   skipped: it blocks nobody and holds no reservation. It runs in the
//	   walk because it counts the pass's own starts.
//	   ▼
//	gang placement (place.go, fit.go, gpu/):
//	   feasibility (partition, GPU nodes) → fit (fill; fGPU devices,
//	   best fit) → rank (best-fit node index) ── fits ──► Placement
//	   │ does not fit now
//	   ▼
//	backfill (backfill.go):
//	   depth 0: Resources, and Priority for every job behind (strict FIFO)
//	   jobs that keep a reservation (KeepReservations, Reason Resources)
//	     and jobs past the starvation threshold go first, oldest first;
//	     the kept ones hold a reservation whatever the depth
//	   first ReservationDepth blocked jobs: reservation at the earliest
//	     start ──► Resources + StartEstimate
//	   later jobs (shortest walltime first with ShortestFirst) start now
//	     only if they delay no reservation (Placement.Backfilled), else
//	     Priority
//	   │ does not fit, may preempt (preempt.go)
//	   ▼
//	preemption: the fewest, lowest-ranked, youngest running jobs whose
//	   stop lets the whole gang start ──► Preemptions + Preempting, and
//	   a reservation from now on what they free
//	   ▼
//	Plan{Placements, Reasons (changes only), Starts, Preemptions}
//
// Every input of every stage is in the Snapshot: the caller (schedd's
// sched/snapshot.go, bsim's sim) only describes the jobs and the
// machine, and decides no reason itself. To add a stage, give it its own
// file and tests, and call it from Schedule (a verdict on each job alone)
// or from pass.job (one that depends on what the pass started).
//
// The zero Policy is strict FIFO in queue order; DefaultPolicy is fair
// share without starving (see its comment and docs/scheduling.md).
//
// It must stay pure: no troupe package outside sched/core/..., no
// internal/api, no I/O and no clock (the time is an argument).
package core

import (
	"cmp"
	"slices"
	"time"

	"github.com/troupe-hpc/troupe/internal/reason"
)

// DefaultPolicy is the recommended policy: fair share without starving.
//
//   - The head of the queue holds a reservation until it starts
//     (KeepReservations): backfill and jobs of higher priority that come
//     later may not delay it. The head is the oldest job that has waited
//     DefaultStarvationAge, else the job of highest priority.
//   - Priority is Slurm-like multifactor: fair share and age equal, wide
//     jobs favoured (they are the ones backfill cannot start, so they go
//     first to the reservation), partition tier.
//   - Below the reservation, jobs start shortest walltime first where
//     they delay it not (EASY backfill with shortest-job backfilling).
//   - Where partitions or QOSes allow preemption, a job preempted is
//     not preempted again for DefaultPreemptWindow.
//   - A pass tries at most DefaultQueueDepth jobs of each partition
//     besides those that keep a reservation; the rest wait their turn
//     with their reason.
//
// On the shared traces (cmd/bsim --compare easy) it beats EASY's mean
// bounded slowdown and mean wait at the same utilization, while no job
// waits longer than under EASY (max wait within 1%) and jobs wider than a
// quarter of the machine wait less on average.
func DefaultPolicy() Policy {
	return Policy{
		Weights:          Weights{Age: 10000, FairShare: 10000, JobSize: 20000, Partition: 10000, QOS: 10000},
		MaxAge:           DefaultMaxAge,
		ReservationDepth: 1,
		KeepReservations: true,
		StarvationAge:    DefaultStarvationAge,
		ShortestFirst:    true,
		PreemptWindow:    DefaultPreemptWindow,
		PreemptDepth:     DefaultPreemptDepth,
		QueueDepth:       DefaultQueueDepth,
	}
}

// DefaultPreemptWindow is DefaultPolicy's preemption window: a job
// preempted less than this ago is not preempted again.
const DefaultPreemptWindow = 10 * time.Minute

// DefaultPreemptDepth is DefaultPolicy's bound on the pending jobs that
// choose victims in one pass: a burst of urgent work preempts in
// priority order over a few passes, each as cheap as one without
// preemption.
const DefaultPreemptDepth = 100

// DefaultQueueDepth is DefaultPolicy's bound on the jobs of a partition
// one pass tries (Policy.QueueDepth): enough to fill a large cluster's
// free slots in a pass, few enough that a pass costs the same with a
// million queued.
const DefaultQueueDepth = 1000

// DefaultStarvationAge is DefaultPolicy's starvation threshold: a job
// pending this long goes before every job that has not, oldest first.
const DefaultStarvationAge = 6 * time.Hour

// Schedule computes the plan for s at now: which pending jobs start where,
// the pending reasons that change, and when reserved jobs should start.
// It reads s only.
func Schedule(s Snapshot, now time.Time) Plan {
	var plan Plan
	ok := eligible(&s, &plan)
	c := newCluster(s.Nodes)
	pr := newPrio(&s, c.totalCPU)
	pass := pass{s: &s, c: c, now: now, plan: &plan, limits: newLimits(&s), lic: newLicenses(&s), gate: newGate(c, s.Reservations, now),
		pre: newPreemption(&s)}
	pass.prepare(ok)
	pass.reservations(ok)
	order := pr.order(s.Queue, ok, now)
	front := 0
	if s.Policy.ReservationDepth > 0 {
		pass.bf = newBackfill(c, pass.gate, &s, now)
		pass.bf.lic = pass.lic
		order, front = pass.promote(order)
	}
	if d := s.Policy.QueueDepth; d > 0 {
		order, front = pass.bound(order, front, d)
	}
	sorted := !s.Policy.ShortestFirst || pass.bf == nil
	for k, qi := range order {
		// A kept reservation is held whatever the depth; an aged job
		// without one gets one while the depth allows, as any other.
		pass.job(qi, k < front && s.Policy.KeepReservations && keeps(&s.Queue[qi]))
		if !sorted && k+1 >= front && len(pass.bf.resv) >= s.Policy.ReservationDepth {
			pass.shortestFirst(order[k+1:])
			sorted = true
		}
	}
	return plan
}

// promote moves to the front of order, oldest first, the jobs that go
// before every other whatever their priority: those that keep a
// reservation (Policy.KeepReservations) and those past the starvation
// threshold. It returns the new order and how many lead it.
func (p *pass) promote(order []int32) ([]int32, int) {
	var front, rest []int32
	var ages ageCache
	for _, qi := range order {
		if p.promoted(&p.s.Queue[qi], &ages) {
			front = append(front, qi)
		} else {
			rest = append(rest, qi)
		}
	}
	if len(front) == 0 {
		return order, 0
	}
	// Oldest first; submit times equal to the microsecond keep priority
	// order. A job waiting for the jobs it preempted goes before them
	// all: what its victims free is its own.
	rs := make([]ranked, len(front))
	for k, qi := range front {
		rs[k] = ranked{p: -float64(p.s.Queue[qi].Submit.UnixNano()), i: qi}
	}
	radixOrder(rs, front)
	slices.SortStableFunc(front, func(a, b int32) int {
		return preempting(&p.s.Queue[b]) - preempting(&p.s.Queue[a])
	})
	return append(front, rest...), len(front)
}

// bound keeps of order (front of it promoted) the jobs one pass tries
// with Policy.QueueDepth depth: every job that keeps its reservation,
// the first depth of the others in each partition, and each partition's
// first job below the front (its job of highest priority) whatever the
// depth. It returns them in the same order and how many of them lead it.
func (p *pass) bound(order []int32, front, depth int) ([]int32, int) {
	if len(order) <= depth {
		return order, front
	}
	out := make([]int32, 0, depth+1)
	tried := map[string]int{} // by partition
	topped := map[string]bool{}
	lead := 0
	for k, qi := range order {
		j := &p.s.Queue[qi]
		switch {
		case k < front && p.s.Policy.KeepReservations && keeps(j):
		case k >= front && !topped[j.Partition]:
			tried[j.Partition]++
		case tried[j.Partition] < depth:
			tried[j.Partition]++
		default:
			continue
		}
		if k >= front {
			topped[j.Partition] = true
		} else {
			lead++
		}
		out = append(out, qi)
	}
	return out, lead
}

// keeps reports whether j holds a reservation from an earlier pass: it
// waited for resources, or for the jobs it preempted to stop.
func keeps(j *Job) bool { return j.Reason == reason.Resources || j.Reason == reason.Preempting }

// preempting is 1 when j waits for the jobs it preempted, else 0.
func preempting(j *Job) int {
	if j.Reason == reason.Preempting {
		return 1
	}
	return 0
}

// promoted reports whether j goes before the priority order; ages
// remembers the last partition's starvation age.
func (p *pass) promoted(j *Job, ages *ageCache) bool {
	pol := &p.s.Policy
	if pol.KeepReservations && keeps(j) {
		return true
	}
	if !ages.ok || ages.part != j.Partition {
		*ages = ageCache{part: j.Partition, age: starvationAge(p.s, j.Partition), ok: true}
	}
	t := ages.age
	return t > 0 && p.now.Sub(j.Submit) >= t
}

// ageCache is the starvation age of one partition, part.
type ageCache struct {
	part string
	age  time.Duration
	ok   bool
}

// starvationAge is the starvation threshold of partition part in s: the
// partition's own, else the policy's; zero or negative: none.
func starvationAge(s *Snapshot, part string) time.Duration {
	if t := s.Partitions[part].StarvationAge; t != 0 {
		return t
	}
	return s.Policy.StarvationAge
}

// shortestFirst orders the backfill candidates by walltime, shortest
// first; ties keep their (priority) order.
func (p *pass) shortestFirst(rest []int32) {
	if len(rest) < 2 {
		return
	}
	rs := make([]ranked, len(rest))
	for k, qi := range rest {
		rs[k] = ranked{p: -float64(p.meta[qi].end - p.now.UnixNano()), i: qi}
	}
	radixOrder(rs, rest)
}

// jobMeta is what the walk needs of a job before touching it: kept apart
// and small, because the walk visits the queue in priority order, not in
// memory order.
type jobMeta struct {
	end      int64 // now + walltime, unix nanoseconds
	shape    int32 // index into pass.failed; -1: not a uniform gang
	priority bool  // its reason is already Priority
}

// prepare fills the eligible jobs' meta in queue order and numbers
// their shapes.
func (p *pass) prepare(eligible []bool) {
	p.meta = make([]jobMeta, len(p.s.Queue))
	shapes := map[shape]int32{}
	for qi := range p.s.Queue {
		j := &p.s.Queue[qi]
		if !eligible[qi] {
			continue
		}
		m := jobMeta{end: p.now.Add(walltime(j.Walltime)).UnixNano(), shape: -1,
			priority: j.Reason == reason.Priority}
		if sh, ok := shapeOf(j); ok {
			id, seen := shapes[sh]
			if !seen {
				id = int32(len(shapes))
				shapes[sh] = id
			}
			m.shape = id
		}
		p.meta[qi] = m
	}
	p.failed = make([]int64, len(shapes))
	p.noRoom = make([]bool, len(shapes))
	for i := range p.failed {
		p.failed[i] = noFailure
	}
}

// noFailure marks a shape that has not failed in this pass.
const noFailure = 1<<63 - 1

// pass is one walk down the queue.
type pass struct {
	s       *Snapshot
	c       *cluster
	bf      *backfill
	gate    *gate // the reservations; nil: none
	now     time.Time
	plan    *Plan
	blocked bool // a higher job waits
	strict  bool // depth 0 and blocked: nobody else may start
	tried   int  // jobs tried below the first blocked one
	// failed remembers, per gang shape, the earliest end of a run that
	// found no room: resources only shrink during a pass, so the same shape
	// running as long or longer cannot fit either.
	failed []int64
	// noRoom marks, per gang shape, one that found no room even with
	// every reservation set aside: resources only shrink during a pass,
	// so no reservation holds such a job back (heldBack).
	noRoom []bool
	meta   []jobMeta
	limits limits
	pre    preemption
	lic    *licenses // nil: no licenses in the snapshot
}

// shape identifies gangs that place alike.
type shape struct {
	part string
	resv string
	mode string
	n    int
	r    Res
}

func shapeOf(j *Job) (shape, bool) {
	if len(j.Containers) == 0 {
		return shape{}, false
	}
	for _, c := range j.Containers[1:] {
		if c != j.Containers[0] {
			return shape{}, false
		}
	}
	mode := j.Mode
	if mode != ModeMultiNode {
		mode = ModeSingleNode
	}
	return shape{j.Partition, j.Reservation, mode, len(j.Containers), j.Containers[0]}, true
}

func (p *pass) job(qi int32, reserved bool) {
	m := &p.meta[qi]
	pol := &p.s.Policy
	if r := p.limits.check(&p.s.Queue[qi]); r != "" {
		p.plan.setReason(&p.s.Queue[qi], r)
		return
	}
	full := p.bf != nil && len(p.bf.resv) >= pol.ReservationDepth
	if !reserved && (p.strict || (p.blocked && pol.MaxBackfillJobs > 0 && p.tried >= pol.MaxBackfillJobs) ||
		(full && m.shape >= 0 && m.end >= p.failed[m.shape])) {
		if !p.strict && p.preempt(&p.s.Queue[qi], m.shape, p.s.Partitions[p.s.Queue[qi].Partition].GPUQuantum) {
			return
		}
		if !m.priority {
			p.plan.setReason(&p.s.Queue[qi], reason.Priority)
		}
		return
	}
	j := &p.s.Queue[qi]
	if len(j.Containers) == 0 {
		p.plan.setReason(j, reason.Priority)
		return
	}
	if p.blocked && !reserved {
		p.tried++
	}
	w := walltime(j.Walltime)
	end := m.end
	quantum := p.s.Partitions[j.Partition].GPUQuantum
	own := p.gate.own(j)
	// Its licenses first: all of them or none, whatever its nodes.
	switch why := p.licenseCheck(j, end); why {
	case "":
	case licenseDelay:
		p.miss(j, w, own, end, m.shape, quantum, reserved, "")
		return
	default:
		p.miss(j, w, own, end, m.shape, quantum, reserved, why)
		return
	}
	cacheable := m.shape >= 0
	if cacheable && end >= p.failed[m.shape] {
		p.miss(j, w, own, end, m.shape, quantum, reserved, "")
		return
	}
	pl := placer{c: p.c, quantum: quantum, end: end, gate: p.gate, own: own, from: p.now.UnixNano()}
	if p.bf != nil && len(p.bf.resv) > 0 {
		pl.bf = p.bf
	}
	g, ok := pl.place(j.Partition, j)
	if !ok {
		if cacheable {
			// Without backfill reservations or site reservations, no
			// run of the shape fits, however short.
			upto := end
			if pl.bf == nil && (p.gate == nil || p.gate.nodes == nil) {
				upto = -1 << 63
			}
			p.failed[m.shape] = min(p.failed[m.shape], upto)
		}
		p.miss(j, w, own, end, m.shape, quantum, reserved, "")
		return
	}
	p.c.commit(j, g, quantum)
	p.lic.take(j.Licenses)
	if p.bf != nil {
		p.bf.started(gangUses(j, g, p.c, quantum), j.Licenses, end)
	}
	p.plan.Placements = append(p.plan.Placements, Placement{
		JobID: j.ID, Nodes: p.c.names(g.hosts), GPUs: g.shares, Backfilled: p.blocked,
	})
	p.limits.started(j)
}

// miss handles a job of reservation own (-1: none) that cannot start
// now, to run until end; reserved: it gets a reservation whatever the
// depth. why, when set, is its reason whether or not it gets a
// reservation (Licenses). Else a job that would fit now but for a site
// reservation says so in its reason, in place of Resources or Priority;
// such a reason keeps no backfill reservation from one pass to the next
// (KeepReservations keeps those of Resources only), so a window over
// the whole machine does not make every waiting job a kept reservation.
// A job that may preempt stops running jobs instead, when that lets it
// start (preempt.go), and waits Preempting while they stop.
func (p *pass) miss(j *Job, w time.Duration, own int32, end int64, shape int32, quantum float64, reserved bool, why string) {
	if why == "" && own < 0 && p.preempt(j, shape, quantum) {
		return
	}
	p.blocked = true
	held := why
	if held == "" && p.pre.waiting[j.ID] {
		held = reason.Preempting // its victims are still stopping
	}
	if held == reason.Preempting && p.bf != nil && p.holdStopping(j, quantum) {
		p.plan.setReason(j, held)
		return
	}
	if held == "" {
		held = p.heldBack(j, own, end, shape, quantum)
	}
	or := func(r string) string { return cmp.Or(held, r) }
	if p.bf == nil {
		p.strict = true
		p.plan.setReason(j, or(reason.Resources))
		return
	}
	if !reserved && held != reason.Preempting && len(p.bf.resv) >= p.s.Policy.ReservationDepth {
		p.plan.setReason(j, or(reason.Priority))
		return
	}
	p.plan.setReason(j, or(reason.Resources))
	at, g, ok := p.bf.reserve(j.Partition, j, w, quantum)
	if ok {
		p.plan.Starts = append(p.plan.Starts, StartEstimate{
			JobID: j.ID, Start: time.Unix(0, at).In(p.now.Location()), Nodes: p.c.names(g.hosts),
		})
	}
}

func (p *Plan) setReason(j *Job, reason string) {
	if j.Reason != reason {
		p.Reasons = append(p.Reasons, ReasonChange{JobID: j.ID, Reason: reason})
	}
}
