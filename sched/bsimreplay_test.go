package sched

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/depend"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sim"
	"github.com/troupe-hpc/troupe/sim/swf"
)

// replayPartitions is the partitions file of TestReplayMatchesBsim: one
// partition of every node under the default (fairshare) policy, its
// starvation threshold short enough for the trace's queue to cross it,
// usage billed per CPU only (bsim charges processor-seconds).
const replayPartitions = `
partition "all" {
  nodes                = ["*"]
  starvation_threshold = "20m"
}
billing {
  cpu    = 1
  memory = 0
}
`

// replayStarvation is replayPartitions' threshold, for bsim.
const replayStarvation = 20 * time.Minute

// TestReplayMatchesBsim: schedd behaves as bsim predicts. A short trace
// goes through bsim's simulator and through a real Server (raft on disk,
// the scheduler loop as schedd runs it) whose nodes are simulated: the
// test registers them, heartbeats, reads their assignments, reports the
// containers running when placed and exited when the trace's runtime is
// up, on a fake clock. Every job must start at the second bsim says.
//
//   - replay.swf: 48 jobs of three users with contention, 1 to 16
//     processors on 4 nodes of 4 CPUs; every rule of the default policy
//     (backfill, kept reservations, shortest first, the partition's
//     starvation threshold, fair share) changes some start.
//   - replay-decay.swf: fair share after a week with no event, where
//     charging usage as p·dt at the end of the interval (as bsim did)
//     instead of weighing each moment by its decay (as schedd does)
//     gives the other user's job the machine first.
//   - replay-deps.swf: 24 jobs, six waiting for their preceding job's
//     end (SWF field 17, ended(N), as bsim --preceding reads it), one
//     for either of two jobs to complete (done(3) || done(4)), and two
//     submitted held (bsub -H) and released later (brelease): the core
//     decides the holds and dependencies for both, and without them bsim
//     starts some job at another time.
//
// The replay is in lock step with bsim's event loop: one event at a time
// (at equal times terminations first, by job id, then submissions and
// releases in sim.Arrivals' order), the clock set to the event's time, then the loop runs
// until a pass plans nothing (testHookIdle) and is held there while the
// test applies the next event. So schedd's passes run at the times
// bsim's do, on the same state; the loop's own cadence (its idle timer,
// the charge period) never adds a pass between an event and its time.
func TestReplayMatchesBsim(t *testing.T) {
	for _, tt := range []struct {
		trace string
		rules bool // check that the trace exercises every rule
		deps  bool // holds and dependencies (replayDeps)
	}{{"replay.swf", true, false}, {"replay-decay.swf", false, false}, {"replay-deps.swf", false, true}} {
		t.Run(tt.trace, func(t *testing.T) { replayTrace(t, tt.trace, tt.rules, tt.deps) })
	}
}

// replayDeps gives jobs their holds and dependencies: the trace's
// preceding jobs, job 10 waiting for job 3 or 4 to complete, jobs 8 and
// 14 held for a while. It fails the test unless they change bsim's
// schedule.
func replayDeps(t *testing.T, recs []swf.Job, jobs []sim.Job, o sim.Options) {
	t.Helper()
	before, err := sim.Run(jobs, o, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if n := sim.Preceding(recs, jobs); n != 6 {
		t.Fatalf("%d jobs name a preceding job, want 6", n)
	}
	for i := range jobs {
		switch j := &jobs[i]; j.ID {
		case 10:
			j.Depends = &core.Dependency{Any: true, Conditions: []core.Condition{
				{Kind: depend.Done, Job: core.JobRef{ID: 3}}, {Kind: depend.Done, Job: core.JobRef{ID: 4}}}}
		case 8:
			j.Hold = 400
		case 14:
			j.Hold = 90
		}
	}
	after, err := sim.Run(jobs, o, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for id, s := range after.Starts {
		if before.Starts[id] != s {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("the holds and dependencies change no start in bsim: the trace does not test them")
	}
	t.Logf("holds and dependencies change %d of %d starts in bsim", changed, len(jobs))
}

func replayTrace(t *testing.T, trace string, rules, deps bool) {
	const nodes, perNode = 4, 4
	l, err := swf.Open(filepath.Join("testdata", trace))
	if err != nil {
		t.Fatal(err)
	}
	jobs, dropped := sim.FromSWF(l.Jobs, nodes*perNode)
	if dropped != 0 || len(jobs) == 0 {
		t.Fatalf("trace: %d jobs, %d dropped", len(jobs), dropped)
	}
	pol := core.DefaultPolicy()
	pol.StarvationAge = replayStarvation
	if deps {
		replayDeps(t, l.Jobs, jobs, sim.Options{Procs: nodes * perNode, Nodes: nodes, Policy: pol, FairShare: true})
	}
	want, err := sim.Run(jobs, sim.Options{Procs: nodes * perNode, Nodes: nodes, Policy: pol, FairShare: true}, time.Now)
	if err != nil {
		t.Fatal(err)
	}

	// The trace exercises every rule of the policy: bsim without any one
	// of them starts some job at another time.
	if rules {
		for name, p := range map[string]core.Policy{
			"no backfill":                        func() core.Policy { p := pol; p.ReservationDepth = 0; return p }(),
			"reservations recomputed every pass": func() core.Policy { p := pol; p.KeepReservations = false; return p }(),
			"backfill in priority order":         func() core.Policy { p := pol; p.ShortestFirst = false; return p }(),
			"the default starvation threshold":   func() core.Policy { p := pol; p.StarvationAge = core.DefaultStarvationAge; return p }(),
			"no fair share":                      pol,
		} {
			o, err := sim.Run(jobs, sim.Options{Procs: nodes * perNode, Nodes: nodes, Policy: p, FairShare: name != "no fair share"}, time.Now)
			if err != nil {
				t.Fatal(err)
			}
			if maps.Equal(o.Starts, want.Starts) {
				t.Fatalf("with %s bsim starts every job of the trace at the same time: the trace does not test that rule", name)
			}
		}
	}

	// bsim's order of submissions: stable by submit time. schedd numbers
	// jobs 1, 2, ... in that order; the trace's ids are the same.
	slices.SortStableFunc(jobs, func(a, b sim.Job) int { return int(a.Submit - b.Submit) })
	for i, j := range jobs {
		if j.ID != uint64(i+1) {
			t.Fatalf("trace job %d is the %dth submitted: the replay needs ids 1, 2, ... in submit order", j.ID, i+1)
		}
	}

	r := newReplay(t, nodes, perNode)
	byID := map[uint64]sim.Job{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	var ends replayEnds
	arrivals := sim.Arrivals(jobs)
	next := 0
	for next < len(arrivals) || len(ends) > 0 {
		if len(ends) > 0 && (next >= len(arrivals) || ends[0].at <= arrivals[next].At) {
			e := heap.Pop(&ends).(replayEnd)
			r.at(e.at)
			r.exit(e.id)
		} else {
			a := arrivals[next]
			next++
			r.at(a.At)
			if a.Release {
				r.releaseJob(a.Job.ID)
			} else {
				r.submit(*a.Job)
			}
		}
		for _, id := range r.settle() {
			heap.Push(&ends, replayEnd{at: r.now + byID[id].Run, id: id})
		}
	}
	r.release()

	exact := 0
	v := r.srv.Store().Snapshot()
	for _, j := range jobs {
		sj := v.Job(j.ID)
		if sj == nil || sj.State != api.JobCompleted {
			t.Fatalf("job %d: %+v, want COMPLETED", j.ID, sj)
		}
		got := int64(sj.Started.Sub(r.t0) / time.Second)
		if w := want.Starts[j.ID]; got != w {
			t.Errorf("job %d (%d procs, user %s, submitted %d, walltime %ds): schedd started it at %d, bsim at %d",
				j.ID, j.Procs, j.User, j.Submit, j.Estimate, got, w)
			continue
		}
		exact++
	}
	t.Logf("%d of %d jobs started at the second bsim predicted (bsim: mean wait %.0fs, max %.0fs)", exact, len(jobs), want.MeanWait, want.MaxWait)
}

// replay drives a Server and its simulated nodes for TestReplayMatchesBsim.
type replay struct {
	t      *testing.T
	srv    *Server
	c      *client.Client
	clock  *fakeClock
	t0     time.Time
	now    int64 // seconds since t0
	nodes  []string
	idle   chan uint64
	resume chan struct{}
	held   bool          // the loop waits in testHookIdle for resume
	free   chan struct{} // closed: the loop no longer waits for the test
	freed  sync.Once
	// placed are the jobs seen started.
	placed map[uint64]bool
}

func newReplay(t *testing.T, nodes, perNode int) *replay {
	t.Helper()
	r := &replay{t: t, clock: &fakeClock{t: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)},
		idle: make(chan uint64), resume: make(chan struct{}), free: make(chan struct{}), placed: map[uint64]bool{}}
	r.t0 = r.clock.Now()
	path := filepath.Join(t.TempDir(), "partitions.hcl")
	if err := os.WriteFile(path, []byte(replayPartitions), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Usage is charged whenever the clock has moved (bsim charges at every
	// event); nodes heartbeat at every event, but the trace has gaps
	// longer than the default node timeout, which is for real clocks.
	// Ended jobs stay in the state to the end (the export loop ticks in
	// real time while the fake clock leaps hours: under load it would
	// purge jobs the test reads back). bsim passes at every event: so
	// does the loop here (no pass put off behind a full cluster, which
	// the fake clock would never end).
	srv, err := Open(ctx, Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		PartitionsFile: path, Clock: r.clock.Now, ChargeEvery: time.Nanosecond, NodeTimeout: 1000 * time.Hour,
		KeepEnded: 1000 * time.Hour, QueuedDefer: -1})
	if err != nil {
		t.Fatal(err)
	}
	setHook(t, &testHookIdle, func(rp *replica, index uint64) {
		if rp != srv.replica {
			return
		}
		select {
		case r.idle <- index:
		case <-r.free:
			return
		}
		select {
		case <-r.resume:
		case <-r.free:
		}
	})
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { r.release(); hs.Close(); cancel(); <-done; srv.Close() })
	r.srv = srv
	if r.c, err = client.New(hs.URL); err != nil {
		t.Fatal(err)
	}
	// The nodes are named as bsim names its own, so that placement ties
	// break the same way.
	for i := range nodes {
		name := fmt.Sprintf("n%05d", i)
		r.nodes = append(r.nodes, name)
		register(t, r.c, name, int64(perNode))
	}
	r.settle()
	return r
}

// at moves the clock to s seconds after t0 (never back) and heartbeats
// every node there, as their nodelets would.
func (r *replay) at(s int64) {
	r.t.Helper()
	if s < r.now {
		r.t.Fatalf("replay went back in time: %d after %d", s, r.now)
	}
	r.clock.Add(time.Duration(s-r.now) * time.Second)
	r.now = s
	for _, n := range r.nodes {
		if _, err := r.c.Heartbeat(context.Background(), n, api.NodeHeartbeat{}); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *replay) submit(j sim.Job) {
	r.t.Helper()
	s := jobspec.Job{Name: fmt.Sprint("trace-", j.ID), Image: "host", Command: []string{"true"},
		Cluster:   jobspec.Cluster{Size: j.Procs, Mode: jobspec.ModeMultiNode},
		Resources: jobspec.Resources{CPU: 1, Memory: 1 << 20}, Walltime: time.Duration(j.Estimate) * time.Second}
	req := api.SubmitRequest{Spec: wire.ToAPI(s), User: "u" + j.User, UID: 1000, GID: 1000, Hold: j.Hold > 0}
	if d := j.Depends; d != nil {
		req.DependsOn = &api.Dependency{Any: d.Any}
		for _, c := range d.Conditions {
			req.DependsOn.Conditions = append(req.DependsOn.Conditions, api.Condition{Kind: api.DepKind(c.Kind), JobID: c.Job.ID})
		}
	}
	res, err := r.c.Submit(context.Background(), req)
	if err != nil {
		r.t.Fatalf("submitting trace job %d: %v", j.ID, err)
	}
	if res.JobID != j.ID {
		r.t.Fatalf("trace job %d got id %d", j.ID, res.JobID)
	}
}

// releaseJob releases held job id (brelease).
func (r *replay) releaseJob(id uint64) {
	r.t.Helper()
	if _, err := r.c.Release(context.Background(), id); err != nil {
		r.t.Fatalf("releasing trace job %d: %v", id, err)
	}
}

// exit reports every container of job id exited (0) on its nodes.
func (r *replay) exit(id uint64) {
	r.t.Helper()
	r.report(id, api.ContainerExited)
}

// report sends state for all of job id's containers, node by node, as
// the nodelets holding them would.
func (r *replay) report(id uint64, st api.ContainerState) {
	r.t.Helper()
	j := r.srv.Store().Snapshot().Job(id)
	by := map[string][]api.ContainerUpdate{}
	var order []string
	for _, c := range j.Containers {
		if by[c.Node] == nil {
			order = append(order, c.Node)
		}
		by[c.Node] = append(by[c.Node], api.ContainerUpdate{JobID: id, Host: c.Host, State: st})
	}
	for _, n := range order {
		if err := r.c.Report(context.Background(), n, api.ContainerReport{Updates: by[n]}); err != nil {
			r.t.Fatalf("node %s reporting job %d %s: %v", n, id, st, err)
		}
	}
}

// settle lets the loop run until a pass on the state as it is now plans
// nothing; then the nodes read their assignments and report the new ones
// running (at the same virtual second), and the loop settles again. It
// returns the jobs started, by id.
func (r *replay) settle() []uint64 {
	r.t.Helper()
	r.wait()
	var started []uint64
	for _, n := range r.nodes {
		as, err := r.c.Assignments(context.Background(), n, 0, 0)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, a := range as.Assignments {
			if _, ok := r.placed[a.Job.ID]; !ok {
				r.placed[a.Job.ID] = true
				started = append(started, a.Job.ID)
			}
		}
	}
	slices.Sort(started)
	for _, id := range started {
		r.report(id, api.ContainerRunning)
	}
	if len(started) > 0 {
		r.wait()
	}
	return started
}

// wait resumes the loop if it is held and waits until it holds again
// after a pass on the current state.
func (r *replay) wait() {
	r.t.Helper()
	idx, _ := r.srv.Store().Snapshot().Index()
	if r.held {
		r.resume <- struct{}{}
		r.held = false
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-r.idle:
			if got >= idx {
				r.held = true
				return
			}
			r.resume <- struct{}{}
		case <-timeout:
			r.t.Fatalf("the scheduler loop did not settle in 10s at %ds", r.now)
		}
	}
}

// release lets the loop go for good.
func (r *replay) release() { r.freed.Do(func() { close(r.free) }) }

type replayEnd struct {
	at int64
	id uint64
}

// replayEnds orders job ends as bsim does: by time, then job id.
type replayEnds []replayEnd

func (h replayEnds) Len() int { return len(h) }
func (h replayEnds) Less(i, k int) bool {
	if h[i].at != h[k].at {
		return h[i].at < h[k].at
	}
	return h[i].id < h[k].id
}
func (h replayEnds) Swap(i, k int) { h[i], h[k] = h[k], h[i] }
func (h *replayEnds) Push(x any)   { *h = append(*h, x.(replayEnd)) }
func (h *replayEnds) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
