// Package sim replays a workload through the scheduler core in virtual
// time: the same core.Schedule that schedd calls, fed snapshots built from
// the simulated machine, holds and dependencies included (the core
// decides them as it does for schedd). Events are handled one at a time,
// as pyss does: at equal times terminations come before submissions and
// releases of held jobs (Arrivals), and a scheduling pass follows every
// event.
//
// It imports the pure parts only (sched/core, sched/fairshare,
// sim/swf); it must not import sched, sched/state or raft, so that
// bsim runs without a controller.
package sim

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/troupe-hpc/troupe/internal/depend"
	"github.com/troupe-hpc/troupe/internal/reason"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/fairshare"
	"github.com/troupe-hpc/troupe/sim/swf"
)

// ErrNoMachine is returned when the machine has no processors.
var ErrNoMachine = errors.New("machine has no processors")

// Job is one simulated job. Times are whole seconds.
type Job struct {
	ID       uint64
	User     string
	Submit   int64
	Run      int64 // actual runtime, ≥ 1
	Estimate int64 // the walltime the scheduler sees, ≥ Run
	Procs    int
	// Hold, when > 0, submits the job held (bsub -H) and releases it
	// (brelease) Hold seconds later.
	Hold int64
	// Depends, when set, is the job's dependency (bsub -w) on jobs
	// submitted before it; every simulated job ends COMPLETED. Elements
	// of arrays (JobRef.Element) are not simulated.
	Depends *core.Dependency
	// Queue is the trace's queue number (SWF field 15); QOS the quality
	// of service Options.QOS names for it ("": none).
	Queue int64
	QOS   string
	// Licenses are the site-wide licenses the job holds while it runs
	// (Options.Licenses counts them); no trace carries any.
	Licenses map[string]int
}

// Arrival is a submission, or the release of a held job.
type Arrival struct {
	At      int64
	Job     *Job
	Release bool
}

// Arrivals lists the submissions and releases of jobs in the order Run
// handles them: by time; at equal times submissions (in the order of
// jobs) before releases (in the order of their jobs). jobs must be sorted
// by submit time.
func Arrivals(jobs []Job) []Arrival {
	out := make([]Arrival, 0, len(jobs))
	for i := range jobs {
		out = append(out, Arrival{At: jobs[i].Submit, Job: &jobs[i]})
	}
	for i := range jobs {
		if jobs[i].Hold > 0 {
			out = append(out, Arrival{At: jobs[i].Submit + jobs[i].Hold, Job: &jobs[i], Release: true})
		}
	}
	slices.SortStableFunc(out, func(a, b Arrival) int { return cmp.Compare(a.At, b.At) })
	return out
}

// Preceding makes each job whose SWF record names a preceding job
// (field 17) that is in jobs depend on its end: ended(preceding), Slurm's
// afterany. A record's think time (field 18) is not modelled: the trace's
// submit time already has it. It returns how many jobs got one.
func Preceding(recs []swf.Job, jobs []Job) int {
	in := make(map[uint64]bool, len(jobs))
	for _, j := range jobs {
		in[j.ID] = true
	}
	prev := make(map[uint64]uint64, len(recs))
	for _, r := range recs {
		if r.Preceding > 0 && r.Preceding != r.ID {
			prev[uint64(r.ID)] = uint64(r.Preceding)
		}
	}
	n := 0
	for i := range jobs {
		if p, ok := prev[jobs[i].ID]; ok && in[p] {
			jobs[i].Depends = &core.Dependency{Conditions: []core.Condition{{Kind: depend.Ended, Job: core.JobRef{ID: p}}}}
			n++
		}
	}
	return n
}

// FromSWF converts trace records as the archive's simulators read them:
// runtime 0 counts as 1 s; processors are the allocated count, else the
// requested; the estimate is the requested time, else the runtime, never
// below the runtime. Jobs without runtime or processors, and jobs wider
// than procs (when procs > 0), are dropped and counted.
func FromSWF(recs []swf.Job, procs int) (jobs []Job, dropped int) {
	for _, r := range recs {
		run := r.Run
		if run == 0 {
			run = 1
		}
		p := r.Procs
		if p <= 0 {
			p = r.ReqProcs
		}
		if run < 0 || p <= 0 || (procs > 0 && p > int64(procs)) {
			dropped++
			continue
		}
		est := r.ReqTime
		if est <= 0 {
			est = run
		}
		est = max(est, run)
		jobs = append(jobs, Job{ID: uint64(r.ID), User: fmt.Sprint(r.User), Submit: r.Submit, Run: run, Estimate: est, Procs: int(p), Queue: r.Queue})
	}
	return jobs, dropped
}

// Options shape the machine and the policy.
type Options struct {
	// Procs is the machine's processors (the trace's MaxProcs).
	Procs int
	// Nodes splits them into that many equal nodes; jobs then become
	// multi-node gangs of 1-CPU containers. 0 or 1: one node, each job a
	// single container.
	Nodes int
	// Policy is handed to the core as is.
	Policy core.Policy
	// FairShare charges CPU-seconds per user (equal shares) and feeds the
	// factor to the core.
	FairShare bool
	// HalfLife of usage decay; zero: fairshare.DefaultHalfLife.
	HalfLife time.Duration
	// UserLimits cap what each user's running jobs hold at once, as a
	// partition's user_limits in schedd: the core gets them as the
	// partition's, and a job past its user's waits (AccountLimit) while
	// other users' jobs start. Zero: no limits. Run refuses a job wider
	// than the CPU limit: it could never start.
	UserLimits core.Limits
	// Reservations are windows that take nodes away from the jobs
	// (ReadReservations); the trace's jobs run in none.
	Reservations []core.Reservation
	// Licenses are the site's license counts, as partitions.hcl's
	// license blocks give schedd's core (Job.Licenses asks for them).
	Licenses map[string]int
	// Progress, when set, is called now and then with jobs done and total.
	Progress func(done, total int)
	// QOS are the qualities of service of the jobs (Job.QOS), as the
	// core takes them: with PreemptMode, the core's preemption stage
	// stops running jobs for pending ones of a QOS that may preempt
	// theirs, exactly as schedd's; a victim stops at once (no grace).
	QOS map[string]core.QOS
	// PreemptMode is the one partition's preempt_mode: core.PreemptRequeue
	// (the victim goes back to the queue, its work lost) or
	// core.PreemptCancel (it ends); "" or core.PreemptOff: none.
	PreemptMode string
	// Urgent is the QOS whose jobs' waits Result.Preemption reports.
	Urgent string
}

// PreemptStats are the preemption figures of a replay.
type PreemptStats struct {
	// Preemptions counts the running jobs stopped; Requeued and
	// Cancelled split them by mode.
	Preemptions int `json:"preemptions"`
	Requeued    int `json:"requeued"`
	Cancelled   int `json:"cancelled"`
	// LostCoreHours is the work the requeued runs had done: processors
	// × time run, in hours.
	LostCoreHours float64 `json:"lost_core_hours"`
	// Twice counts preemptions of a job already preempted less than the
	// policy's PreemptWindow before: the core must make none.
	Twice int `json:"preempted_twice_in_window"`
	// Urgent is the wait of the jobs of Options.Urgent (first start −
	// submit).
	Urgent Dist `json:"urgent"`
}

// Result is what bsim prints.
type Result struct {
	Jobs         int     `json:"jobs"`
	MeanWait     float64 `json:"mean_wait_s"`
	MeanBSLD     float64 `json:"mean_bounded_slowdown"`
	MaxWait      float64 `json:"max_wait_s"`
	WideMeanWait float64 `json:"wide_mean_wait_s"` // jobs using over a quarter of the machine
	Utilization  float64 `json:"utilization"`
	// Reserved is the share of the machine's processor-time, over the
	// makespan, that the reservations' windows take (0 without any).
	Reserved float64 `json:"reserved,omitempty"`
	// IdleWaiting is the share of the machine's processor-time, over the
	// makespan, left idle outside the windows while jobs waited: what
	// fragmentation and the nodes kept free ahead of a window cost.
	IdleWaiting      float64 `json:"idle_waiting"`
	Makespan         float64 `json:"makespan_s"`
	Placements       int     `json:"placements"`
	Passes           int     `json:"passes"`
	PlacementsPerSec float64 `json:"placements_per_sec"`
	WallSeconds      float64 `json:"wall_s"`
	// Classes are the distributions of wait and bounded slowdown: all
	// jobs, then by width (1 processor, up to a quarter of the machine,
	// wider); a class without jobs is left out.
	Classes []Dist `json:"classes"`
	// Users are the share of the machine each user received against the
	// share configured (equal shares), by user name.
	Users []UserShare `json:"users"`
	// Starts is when each job started, by id.
	Starts map[uint64]int64 `json:"-"`
	// Preemption, with Options.QOS, are the preemption figures.
	Preemption *PreemptStats `json:"preemption,omitempty"`
}

// Width classes of Dist.Class.
const (
	ClassAll     = "all"
	ClassOne     = "1"     // one processor
	ClassQuarter = "<=1/4" // more than one, at most a quarter of the machine
	ClassWide    = ">1/4"  // wider than a quarter of the machine
)

// Dist is the distribution of wait (s) and bounded slowdown over one
// class of jobs; percentiles are nearest-rank.
type Dist struct {
	Class string  `json:"class"`
	Jobs  int     `json:"jobs"`
	Wait  Summary `json:"wait_s"`
	BSLD  Summary `json:"bounded_slowdown"`
}

// Summary is a sample's mean, percentiles and maximum.
type Summary struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// UserShare is what one user got: Received is the user's processor-seconds
// over everyone's, Configured the share the fair-share tree gives the user
// (equal shares: 1 over the users). Jobs and MeanWait are the user's.
type UserShare struct {
	User       string  `json:"user"`
	Jobs       int     `json:"jobs"`
	Configured float64 `json:"configured"`
	Received   float64 `json:"received"`
	MeanWait   float64 `json:"mean_wait_s"`
}

// summarize sorts xs and sums it up.
func summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	slices.Sort(xs)
	rank := func(p float64) float64 {
		k := int(math.Ceil(p*float64(len(xs)))) - 1
		return xs[max(0, min(k, len(xs)-1))]
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return Summary{Mean: sum / float64(len(xs)), P50: rank(0.5), P90: rank(0.9), P99: rank(0.99), Max: xs[len(xs)-1]}
}

// class is a job's width class on a machine of procs processors.
func class(width, procs int) string {
	switch {
	case width*4 > procs:
		return ClassWide
	case width == 1:
		return ClassOne
	}
	return ClassQuarter
}

// Tau is the bounded-slowdown threshold (s).
const Tau = 10

// epoch is virtual time zero.
var epoch = time.Unix(0, 0).UTC()

func at(s int64) time.Time { return epoch.Add(time.Duration(s) * time.Second) }

type running struct {
	job   *Job
	start int64
	end   int64
	gone  bool // preempted: its end never comes
}

type endHeap []*running

func (h endHeap) Len() int { return len(h) }
func (h endHeap) Less(i, k int) bool {
	if h[i].end != h[k].end {
		return h[i].end < h[k].end
	}
	return h[i].job.ID < h[k].job.ID
}
func (h endHeap) Swap(i, k int) { h[i], h[k] = h[k], h[i] }
func (h *endHeap) Push(x any)   { *h = append(*h, x.(*running)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// machine is the simulated cluster and queue between passes.
type machine struct {
	o       Options
	nodes   []core.Node
	nodeIdx map[string]int
	queue   []core.Job // pending, submit order
	byID    map[uint64]*Job
	run     map[uint64]*running
	runs    []core.Running
	ends    endHeap
	users   map[string]bool
	usage   map[string]fairshare.Usage
	perUser map[string]int // processors in use
	charged int64          // when usage was last charged
	starts  map[uint64]int64
	parts   map[string]core.Partition // the one partition ("") and its user limits
	// named is what dependencies ask of the jobs they name (Snapshot.Named).
	named map[core.JobRef]core.JobStatus
	// preempted is when each job was last preempted; ended when each
	// ended (a requeued job ends later than its first start + run).
	preempted map[uint64]int64
	ended     map[uint64]int64
	pst       PreemptStats
	stopped   []uint64            // the victims of the last pass
	queued    map[uint64]core.Job // a started job as it was queued (to requeue it)
	// idleAt is the time idleUntil last counted to; idle the
	// processor-seconds left free outside open windows while jobs waited.
	idleAt int64
	idle   float64
}

// Run simulates jobs (in any order) and measures the outcome.
func Run(jobs []Job, o Options, wall func() time.Time) (Result, error) {
	if o.Procs <= 0 {
		return Result{}, ErrNoMachine
	}
	if o.HalfLife == 0 {
		o.HalfLife = fairshare.DefaultHalfLife
	}
	if c := o.UserLimits.Res.CPUMilli; c > 0 {
		for _, j := range jobs {
			if int64(j.Procs)*1000 > c {
				return Result{}, fmt.Errorf("job %d needs %d processors, more than one user may hold (UserLimits: %g); it would never start (drop it, as schedd refuses it at submission)",
					j.ID, j.Procs, float64(c)/1000)
			}
		}
	}
	m := newMachine(o)
	js := slices.Clone(jobs)
	slices.SortStableFunc(js, func(a, b Job) int { return cmp.Compare(a.Submit, b.Submit) })
	if err := m.dependencies(js); err != nil {
		return Result{}, err
	}
	arrivals := Arrivals(js)
	t0 := wall()
	var res Result
	next := 0
	done := 0
	var now int64
	idle := 0 // passes at window edges alone that started nothing
	for next < len(arrivals) || len(m.ends) > 0 || (len(m.queue) > 0 && idle <= 2*len(o.Reservations)+2) {
		edge, hasEdge := m.nextEdge(now)
		switch {
		case hasEdge && (len(m.ends) == 0 || edge < m.ends[0].end) && (next >= len(arrivals) || edge < arrivals[next].At):
			// A window opens or closes before anything else happens.
			m.idleUntil(edge)
			now = edge
			placed := m.schedule(now)
			res.Placements += placed
			res.Passes++
			if len(m.ends) == 0 && next >= len(arrivals) && placed == 0 {
				idle++
			} else {
				idle = 0
			}
			continue
		case next >= len(arrivals) && len(m.ends) == 0:
			idle = 2*len(o.Reservations) + 3 // nothing more will happen
			continue
		}
		idle = 0
		if len(m.ends) > 0 && (next >= len(arrivals) || m.ends[0].end <= arrivals[next].At) {
			r := heap.Pop(&m.ends).(*running)
			if r.gone {
				continue
			}
			m.idleUntil(r.end)
			now = r.end
			m.finish(r)
			done++
			if o.Progress != nil && done%1000 == 0 {
				o.Progress(done, len(js))
			}
		} else {
			a := arrivals[next]
			next++
			m.idleUntil(a.At)
			now = a.At
			if a.Release {
				m.release(a.Job)
			} else {
				m.submit(a.Job)
			}
		}
		res.Placements += m.schedule(now)
		res.Passes++
	}
	if len(m.queue) > 0 {
		j := &m.queue[0]
		return Result{}, fmt.Errorf("job %d never started (%s) and %d job(s) with it: its dependency can never be met, or no gap between the reservations' windows is long enough for it", j.ID, j.Reason, len(m.queue)-1)
	}
	elapsed := wall().Sub(t0).Seconds()
	m.measure(js, &res)
	if o.QOS != nil {
		m.urgent(js)
		res.Preemption = &m.pst
	}
	res.Starts = m.starts
	res.WallSeconds = elapsed
	if elapsed > 0 {
		res.PlacementsPerSec = float64(res.Placements) / elapsed
	}
	if o.Progress != nil {
		o.Progress(len(js), len(js))
	}
	return res, nil
}

func newMachine(o Options) *machine {
	m := &machine{o: o, byID: map[uint64]*Job{}, run: map[uint64]*running{}, starts: map[uint64]int64{},
		users: map[string]bool{}, usage: map[string]fairshare.Usage{}, perUser: map[string]int{},
		nodeIdx: map[string]int{}}
	if o.UserLimits != (core.Limits{}) || o.PreemptMode != "" {
		m.parts = map[string]core.Partition{"": {UserLimits: o.UserLimits, PreemptMode: o.PreemptMode}}
	}
	m.preempted, m.ended, m.queued = map[uint64]int64{}, map[uint64]int64{}, map[uint64]core.Job{}
	n := max(1, o.Nodes)
	for i := 0; i < n; i++ {
		cpu := int64(o.Procs / n)
		if i < o.Procs%n {
			cpu++
		}
		r := core.Res{CPUMilli: cpu * 1000}
		name := nodeName(i)
		m.nodeIdx[name] = i
		m.nodes = append(m.nodes, core.Node{Name: name, Capacity: r, Free: r})
	}
	return m
}

// dependencies checks the jobs' dependencies (js in submit order) as
// schedd does at submission, and sets up what the core needs of the jobs
// they name.
func (m *machine) dependencies(js []Job) error {
	pos := make(map[uint64]int, len(js))
	for i, j := range js {
		pos[j.ID] = i
	}
	for i, j := range js {
		if j.Depends == nil {
			continue
		}
		if len(j.Depends.Conditions) == 0 {
			return fmt.Errorf("job %d: dependency without conditions", j.ID)
		}
		for _, c := range j.Depends.Conditions {
			switch p, ok := pos[c.Job.ID]; {
			case c.Job.Element:
				return fmt.Errorf("job %d: dependency on element %d[%d]: the simulator has no job arrays", j.ID, c.Job.ID, c.Job.Index)
			case !ok:
				return fmt.Errorf("job %d: dependency on job %d, which is not in the workload", j.ID, c.Job.ID)
			case p >= i:
				return fmt.Errorf("job %d: dependency on job %d, submitted after it (schedd refuses a dependency on a job it does not know yet)", j.ID, c.Job.ID)
			}
			if m.named == nil {
				m.named = map[core.JobRef]core.JobStatus{}
			}
			m.named[c.Job] = core.JobStatus{} // set as the job goes
		}
	}
	return nil
}

// setStatus records st for job id when a dependency names it.
func (m *machine) setStatus(id uint64, st core.JobStatus) {
	if _, ok := m.named[core.JobRef{ID: id}]; ok {
		m.named[core.JobRef{ID: id}] = st
	}
}

// release puts held job j back in the queue, as brelease: pending with
// reason Priority until the next pass.
func (m *machine) release(j *Job) {
	for i := range m.queue {
		if q := &m.queue[i]; q.ID == j.ID {
			q.Held, q.Reason = false, reason.Priority
			return
		}
	}
}

func (m *machine) submit(j *Job) {
	m.byID[j.ID] = j
	cj := core.Job{ID: j.ID, User: j.User, Account: j.User, Submit: at(j.Submit),
		Walltime: time.Duration(j.Estimate) * time.Second, Mode: core.ModeSingleNode,
		Depends: j.Depends, Held: j.Hold > 0, QOS: j.QOS, Licenses: j.Licenses}
	// The reason schedd gives at submission.
	cj.Reason = reason.Waiting(cj.Held, cj.Depends != nil, false)
	if m.o.Nodes > 1 {
		cj.Mode = core.ModeMultiNode
		cj.Containers = make([]core.Res, j.Procs)
		for i := range cj.Containers {
			cj.Containers[i] = core.Res{CPUMilli: 1000}
		}
	} else {
		cj.Containers = []core.Res{{CPUMilli: int64(j.Procs) * 1000}}
	}
	m.queue = append(m.queue, cj)
	m.users[j.User] = true
}

func (m *machine) finish(r *running) {
	m.charge(r.end)
	delete(m.run, r.job.ID)
	for i := range m.runs {
		if m.runs[i].JobID == r.job.ID {
			for k, n := range m.runs[i].Nodes {
				ni := m.nodeIndex(n)
				m.nodes[ni].Free = m.nodes[ni].Free.Add(m.runs[i].Containers[k])
			}
			m.runs = slices.Delete(m.runs, i, i+1)
			break
		}
	}
	m.perUser[r.job.User] -= r.job.Procs
	m.ended[r.job.ID] = r.end
	m.setStatus(r.job.ID, core.JobStatus{Started: true, Ended: true, Completed: true})
}

func (m *machine) nodeIndex(name string) int { return m.nodeIdx[name] }

// charge bills every running job's CPU-seconds since the last charge,
// each moment weighed by its decay to now, as schedd charges (state's
// charge): ∫ 2^(−(now−t)/h) dt over (last, now] = h/ln2·(1 − 2^(−dt/h)).
// The result does not depend on how often usage is charged; adding the
// plain p·dt at now would weigh a long interval's usage as if it were all
// recent, and order users differently from schedd.
func (m *machine) charge(now int64) {
	if !m.o.FairShare {
		return
	}
	dt := now - m.charged
	m.charged = now
	if dt <= 0 {
		return
	}
	h := m.o.HalfLife.Seconds()
	w := h / math.Ln2 * (1 - fairshare.Decay(time.Duration(dt)*time.Second, m.o.HalfLife))
	for u, p := range m.perUser {
		if p > 0 {
			m.usage[u] = m.usage[u].Add(at(now), float64(p)*w, m.o.HalfLife)
		}
	}
}

// fairShare sets every queued job's factor from the users' usage.
func (m *machine) fairShare(now int64) {
	if !m.o.FairShare {
		return
	}
	m.charge(now)
	// A flat tree of users with equal shares: S = 1/N, Ue = Un, the
	// classic algorithm's depth-0 case (fairshare.Tree computes the same).
	total := 0.0
	for _, us := range m.usage {
		total += us.To(at(now), m.o.HalfLife).Value
	}
	s := 1 / float64(len(m.users))
	f := make(map[string]float64, len(m.usage))
	for u, us := range m.usage {
		un := 0.0
		if total > 0 {
			un = us.To(at(now), m.o.HalfLife).Value / total
		}
		f[u] = fairshare.Factor(un, s)
	}
	for i := range m.queue {
		if v, ok := f[m.queue[i].User]; ok {
			m.queue[i].FairShare = v
		} else {
			m.queue[i].FairShare = 1
		}
	}
}

// schedule runs one pass at now and applies its plan; a pass that
// preempted is followed by another, the victims gone, that starts the
// preemptors.
func (m *machine) schedule(now int64) int {
	n := m.pass(now)
	for len(m.stopped) > 0 {
		m.stopped = m.stopped[:0]
		n += m.pass(now)
	}
	return n
}

// pass runs one pass at now and applies its plan.
func (m *machine) pass(now int64) int {
	m.fairShare(now)
	snap := core.Snapshot{Nodes: m.nodes, Queue: m.queue, Running: m.runs, Policy: m.o.Policy, Partitions: m.parts, Named: m.named,
		QOS: m.o.QOS, Reservations: m.o.Reservations, Licenses: m.o.Licenses}
	plan := core.Schedule(snap, at(now))
	for _, p := range plan.Preemptions {
		m.preempt(p, now)
	}
	if len(plan.Reasons) > 0 {
		pos := make(map[uint64]int, len(m.queue))
		for i := range m.queue {
			pos[m.queue[i].ID] = i
		}
		for _, r := range plan.Reasons {
			m.queue[pos[r.JobID]].Reason = r.Reason
		}
	}
	if len(plan.Placements) == 0 {
		return 0
	}
	placed := make(map[uint64]core.Placement, len(plan.Placements))
	for _, p := range plan.Placements {
		placed[p.JobID] = p
	}
	q := m.queue[:0]
	for _, cj := range m.queue {
		p, ok := placed[cj.ID]
		if !ok {
			q = append(q, cj)
			continue
		}
		j := m.byID[cj.ID]
		for k, n := range p.Nodes {
			ni := m.nodeIndex(n)
			m.nodes[ni].Free = m.nodes[ni].Free.Sub(cj.Containers[k])
		}
		r := &running{job: j, start: now, end: now + j.Run}
		m.run[j.ID] = r
		heap.Push(&m.ends, r)
		cr := core.Running{JobID: j.ID, User: j.User, Start: at(now), Walltime: cj.Walltime, Nodes: p.Nodes, Containers: cj.Containers,
			QOS: j.QOS, Licenses: cj.Licenses}
		if t, ok := m.preempted[j.ID]; ok {
			cr.Preempted = at(t)
		}
		m.runs = append(m.runs, cr)
		if m.o.QOS != nil {
			m.queued[j.ID] = cj
		}
		if _, again := m.starts[j.ID]; !again {
			m.starts[j.ID] = now // the first start: its wait
		}
		m.setStatus(j.ID, core.JobStatus{Started: true})
		m.charge(now)
		m.perUser[j.User] += j.Procs
	}
	clear(m.queue[len(q):])
	m.queue = q
	return len(plan.Placements)
}

func (m *machine) measure(js []Job, res *Result) {
	if len(js) == 0 {
		return
	}
	first, last := js[0].Submit, int64(0)
	var busy float64
	waits := map[string][]float64{}
	bslds := map[string][]float64{}
	type acct struct {
		jobs       int
		wait, used float64
	}
	users := map[string]*acct{}
	for i := range js {
		j := &js[i]
		s := m.starts[j.ID]
		w := float64(s - j.Submit)
		b := max(1, (w+float64(j.Run))/max(float64(j.Run), Tau))
		for _, c := range []string{ClassAll, class(j.Procs, m.o.Procs)} {
			waits[c] = append(waits[c], w)
			bslds[c] = append(bslds[c], b)
		}
		u := users[j.User]
		if u == nil {
			u = &acct{}
			users[j.User] = u
		}
		u.jobs++
		u.wait += w
		u.used += float64(j.Run) * float64(j.Procs)
		busy += float64(j.Run) * float64(j.Procs)
		last = max(last, s+j.Run, m.ended[j.ID])
	}
	for _, c := range []string{ClassAll, ClassOne, ClassQuarter, ClassWide} {
		if len(waits[c]) > 0 {
			res.Classes = append(res.Classes, Dist{Class: c, Jobs: len(waits[c]), Wait: summarize(waits[c]), BSLD: summarize(bslds[c])})
		}
	}
	all := res.Classes[0]
	res.Jobs = all.Jobs
	res.MeanWait = all.Wait.Mean
	res.MeanBSLD = all.BSLD.Mean
	res.MaxWait = all.Wait.Max
	if w := waits[ClassWide]; len(w) > 0 {
		res.WideMeanWait = res.Classes[len(res.Classes)-1].Wait.Mean
	}
	for name, u := range users {
		us := UserShare{User: name, Jobs: u.jobs, Configured: 1 / float64(len(users)), MeanWait: u.wait / float64(u.jobs)}
		if busy > 0 {
			us.Received = u.used / busy
		}
		res.Users = append(res.Users, us)
	}
	slices.SortFunc(res.Users, func(a, b UserShare) int { return cmp.Compare(a.User, b.User) })
	res.Makespan = float64(last - first)
	if res.Makespan > 0 {
		res.Utilization = busy / (res.Makespan * float64(m.o.Procs))
		res.Reserved = m.reservedTime(first, last) / (res.Makespan * float64(m.o.Procs))
		res.IdleWaiting = m.idle / (res.Makespan * float64(m.o.Procs))
	}
}

// preempt stops the running victim of p at now, as schedd does once its
// containers are gone: its resources free, and it goes back to the
// queue (requeue: its work so far lost, its wait counted from its
// submission to its first start) or ends (cancel).
func (m *machine) preempt(p core.Preemption, now int64) {
	r := m.run[p.Victim]
	if r == nil {
		return
	}
	m.charge(now)
	if t, ok := m.preempted[p.Victim]; ok && m.o.Policy.PreemptWindow > 0 && at(now).Sub(at(t)) < m.o.Policy.PreemptWindow {
		m.pst.Twice++
	}
	m.preempted[p.Victim] = now
	m.pst.Preemptions++
	r.gone = true
	delete(m.run, p.Victim)
	for i := range m.runs {
		if m.runs[i].JobID == p.Victim {
			for k, n := range m.runs[i].Nodes {
				ni := m.nodeIndex(n)
				m.nodes[ni].Free = m.nodes[ni].Free.Add(m.runs[i].Containers[k])
			}
			m.runs = slices.Delete(m.runs, i, i+1)
			break
		}
	}
	m.perUser[r.job.User] -= r.job.Procs
	m.stopped = append(m.stopped, p.Victim)
	if p.Mode == core.PreemptCancel {
		m.pst.Cancelled++
		m.ended[p.Victim] = now
		m.setStatus(p.Victim, core.JobStatus{Started: true, Ended: true})
		return
	}
	m.pst.Requeued++
	m.pst.LostCoreHours += float64(now-r.start) * float64(r.job.Procs) / 3600
	cj := m.queued[p.Victim]
	cj.Reason = reason.Preempted
	i, _ := slices.BinarySearchFunc(m.queue, cj, func(a, b core.Job) int {
		if c := a.Submit.Compare(b.Submit); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	m.queue = slices.Insert(m.queue, i, cj)
}

// urgent measures the waits of Options.Urgent's jobs.
func (m *machine) urgent(js []Job) {
	if m.o.Urgent == "" {
		return
	}
	var waits, bslds []float64
	for i := range js {
		j := &js[i]
		if j.QOS != m.o.Urgent {
			continue
		}
		w := float64(m.starts[j.ID] - j.Submit)
		waits = append(waits, w)
		bslds = append(bslds, max(1, (w+float64(j.Run))/max(float64(j.Run), Tau)))
	}
	m.pst.Urgent = Dist{Class: m.o.Urgent, Jobs: len(waits), Wait: summarize(waits), BSLD: summarize(bslds)}
}
