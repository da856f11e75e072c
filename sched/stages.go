package sched

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// The stages of a job's pipeline, submitted → placed → preparing →
// running → exited → ended, as troupe_job_stage_seconds labels them.
const (
	stageQueued    = "queued"    // submitted → placed (the plan committed)
	stageDispatch  = "dispatch"  // placed → a container reported preparing
	stagePreparing = "preparing" // preparing → every container running
	stageRunning   = "running"   // running → the first container ended
	stageEnding    = "ending"    // the first container ended → the job ended
)

var stageNames = []string{stageQueued, stageDispatch, stagePreparing, stageRunning, stageEnding}

// stageClock times the stages of the jobs this server commits as leader.
// Only the submission time is in the state; the other boundaries are the
// times of the plan or report entries that passed them (the time the
// leader proposed each, as the state's own Submitted, Started and Ended
// are), kept here and never in the raft log, but for one: a node drops
// a preparing update its container's running update overtook (see
// nodelet/report), and the running update's Starting, the node's own
// measure of the container's start, places that boundary instead. A
// stage is observed once per run of a job placed by this leader (a job
// placed before it led is not timed; a requeued job is timed afresh
// from its next placement). When one report passes two boundaries at
// once (a `true` job's running and exited updates arrive together) the
// skipped stage is observed as 0: the reports' resolution, not the
// job's.
type stageClock struct {
	hist *prometheus.HistogramVec
	// slot is troupe_job_slot_seconds: placed → the first container
	// ended, the time the job held its node's resources as the scheduler
	// saw it (dispatch + preparing + running). The nodelet reports the
	// exit before it tears the container down, so teardown is not in it.
	slot prometheus.Histogram

	mu        sync.Mutex
	jobs      map[uint64]*stageTimes
	nextPrune int
}

// stageTimes are the boundaries a job has passed; zero: not yet.
type stageTimes struct {
	requeues                                      int
	submitted, placed, preparing, running, exited time.Time
}

func newStageClock() *stageClock {
	return &stageClock{
		hist: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "troupe_job_stage_seconds",
			Help: "Time a job spent in each stage of its pipeline (queued: submitted to placed; dispatch: placed to preparing; " +
				"preparing: to running; running: to the first container's end; ending: to the job's end), observed by the leader.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 16), // 0.5ms … ~7 min
		}, []string{"stage"}),
		slot: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "troupe_job_slot_seconds",
			Help: "Time from a job's placement to its first container's end (dispatch + preparing + running), observed by the leader: " +
				"how long the job held what it was placed on.",
			// Finer than the stages' (a factor of 1.4, 0.5 ms … 1 h): the
			// slot of a short job is compared with its process's life.
			Buckets: prometheus.ExponentialBucketsRange(0.0005, 3600, 48),
		}),
		jobs:      map[uint64]*stageTimes{},
		nextPrune: 1024,
	}
}

func (c *stageClock) observe(stage string, from, to time.Time) {
	c.hist.WithLabelValues(stage).Observe(max(to.Sub(from), 0).Seconds())
}

// placing records, before the plan is proposed at at, the jobs it
// places (as v, the snapshot it was made from, shows them): a nodelet
// may report on a job before the loop hears that its plan committed.
func (c *stageClock) placing(v *state.Snapshot, p *state.Plan, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pl := range p.Placements {
		if j := v.Job(pl.JobID); j != nil {
			c.jobs[j.ID] = &stageTimes{requeues: j.Requeues, submitted: j.Submitted, placed: at}
		}
	}
}

// placed observes the queued stage of the jobs p placed once it
// committed (ok), or forgets them when it did not; v is the state after.
func (c *stageClock) placed(v *state.Snapshot, p *state.Plan, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pl := range p.Placements {
		t := c.jobs[pl.JobID]
		switch {
		case t == nil:
		case ok:
			c.observe(stageQueued, t.submitted, t.placed)
		default:
			delete(c.jobs, pl.JobID)
		}
	}
	if len(c.jobs) >= c.nextPrune {
		c.prune(v)
	}
}

// reported advances the jobs a committed report (or batch of them) was
// about to the boundaries their states show at now.
func (c *stageClock) reported(v *state.Snapshot, rs []state.Report, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rs {
		for _, u := range r.Updates {
			t := c.jobs[u.JobID]
			if t == nil {
				continue // placed before this server led, or already ended
			}
			j := v.Job(u.JobID)
			if j == nil || j.Requeues != t.requeues {
				delete(c.jobs, u.JobID) // purged, or back in the queue
				continue
			}
			c.advance(u.JobID, t, j, now, u.Starting)
		}
	}
}

// advance passes the boundaries j's state shows and t has not seen,
// observing each stage that ends there; starting is the update's
// Starting (the preparing boundary, when this update passes it, is that
// long before now, and not before the placement).
func (c *stageClock) advance(id uint64, t *stageTimes, j *state.Job, now time.Time, starting time.Duration) {
	ended := false
	for _, ct := range j.Containers {
		if ct.State.Ended() {
			ended = true
		}
	}
	done := j.State.Terminal()
	if t.preparing.IsZero() && (j.State != api.JobScheduled || ended) {
		t.preparing = now
		if starting > 0 {
			t.preparing = now.Add(-starting)
			if t.preparing.Before(t.placed) {
				t.preparing = t.placed
			}
		}
		c.observe(stageDispatch, t.placed, t.preparing)
	}
	if t.running.IsZero() && (j.State == api.JobRunning || ended || done) {
		t.running = now
		c.observe(stagePreparing, t.preparing, now)
	}
	if t.exited.IsZero() && (ended || done) {
		t.exited = now
		c.observe(stageRunning, t.running, now)
		c.slot.Observe(max(now.Sub(t.placed), 0).Seconds())
	}
	if done {
		c.observe(stageEnding, t.exited, now)
		delete(c.jobs, id)
	}
}

// prune forgets the jobs that left the pipeline other than by a report
// (killed before they started, requeued, purged), so that the map stays
// the size of the jobs in flight; it runs when the map has doubled.
func (c *stageClock) prune(v *state.Snapshot) {
	for id, t := range c.jobs {
		if j := v.Job(id); j == nil || j.State.Terminal() || j.Requeues != t.requeues || j.State == api.JobPending {
			delete(c.jobs, id)
		}
	}
	c.nextPrune = max(2*len(c.jobs), 1024)
}

// forget drops every job: leadership was lost, and the next leader's
// commits are not seen here.
func (c *stageClock) forget() {
	c.mu.Lock()
	clear(c.jobs)
	c.mu.Unlock()
}
