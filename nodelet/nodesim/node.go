package nodesim

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/backoff"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/units"
	"github.com/troupe-hpc/troupe/nodelet/report"
	"github.com/troupe-hpc/troupe/nodelet/session"
)

// assignmentsWait is how long one blocking assignments query may wait,
// as nodelet's.
const assignmentsWait = 30 * time.Second

// defaultHeartbeat is the interval until schedd announces one, as
// nodelet's.
const defaultHeartbeat = 10 * time.Second

// key names one container of one run of a job, as nodelet's.
type key struct {
	job  uint64
	host string
	run  int
}

// node is one simulated nodelet.
type node struct {
	sim      *Sim
	name     string
	instance string
	cli      atomic.Pointer[client.Client] // its own credential once registered with the join token
	rep      *report.Queue

	mu       sync.Mutex
	lease    time.Time     // containers may run until then (monotonic clock)
	unfenced bool          // schedd announces no lease
	every    time.Duration // heartbeat interval schedd announced; 0 none yet
	running  map[key]*container
	finished map[key]bool // ended here; kept while schedd still assigns it
	last     []api.Assignment
	tasks    sync.WaitGroup
}

func newNode(s *Sim, name string) *node {
	b := make([]byte, 16)
	_, _ = crand.Read(b)
	n := &node{sim: s, name: name, instance: hex.EncodeToString(b),
		running: map[key]*container{}, finished: map[key]bool{}}
	n.cli.Store(s.base)
	n.rep = report.New(func(ctx context.Context, r api.ContainerReport) error {
		return n.cli.Load().Report(ctx, n.name, r)
	}, s.log.With("node", name), false)
	return n
}

// run is the node's life, as nodelet.Run's: register (then registered()),
// heartbeat, follow the assignments; on ctx's end stop every container
// and deliver the last reports.
func (n *node) run(ctx context.Context, registered func()) {
	err := n.register(ctx)
	registered()
	if err != nil {
		return
	}
	repCtx, stopRep := context.WithCancel(context.WithoutCancel(ctx))
	repDone := make(chan struct{})
	go func() { n.rep.Run(repCtx); close(repDone) }()
	hbDone := make(chan struct{})
	go func() { n.heartbeat(ctx); close(hbDone) }()
	n.loop(ctx)
	n.tasks.Wait() // each container stops on ctx's end and reports killed
	<-hbDone
	stopRep()
	<-repDone
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if err := n.rep.Drain(drainCtx); err != nil {
		n.sim.log.Warn("final reports not delivered", "node", n.name, "err", err, "queued", n.rep.Pending())
	}
}

// register announces the node, retrying with backoff until schedd
// answers; it fails only when ctx ends. At most RegisterConcurrency
// nodes register at once.
func (n *node) register(ctx context.Context) error {
	c := n.sim.cfg
	reg := api.NodeRegister{Name: n.name, Addr: "127.0.0.1", Runtime: Runtime, Instance: n.instance, Labels: c.Labels,
		Capacity: api.Resources{CPUMilli: units.MilliCPU(c.CPU), Memory: c.Memory, GPU: float64(c.GPUs)}}
	regCli := n.cli.Load()
	if n.sim.join != nil {
		regCli = n.sim.join
	}
	b := report.Backoff()
	for {
		select {
		case n.sim.regs <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		var r api.NodeRegistered
		sent := time.Now()
		_, err := regCli.Do(ctx, http.MethodPost, "/v1/nodes/register", nil, reg, &r)
		<-n.sim.regs
		if err == nil {
			if r.Credential != "" {
				n.cli.Store(n.sim.base.WithToken(r.Credential))
			}
			n.sim.registered.Add(1)
			n.grant(ctx, sent, r.NodeLease)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n.sim.log.Warn("register failed, retrying", "node", n.name, "err", err)
		if b.Wait(ctx) != nil {
			return ctx.Err()
		}
	}
}

// heartbeat tells schedd the node lives as often as its lease asks
// (capped by Config.Heartbeat) and renews the lease with each answer; a
// schedd that forgot the node gets a new registration. The first beat
// comes at a random point of the first interval, as nodes started at
// different times would, so that thousands of nodes started together do
// not beat in step.
func (n *node) heartbeat(ctx context.Context) {
	first := true
	for {
		d := n.heartbeatEvery()
		if first {
			d, first = time.Duration(rand.Int64N(int64(d))+1), false
		}
		if backoff.Sleep(ctx, d) != nil {
			return
		}
		var l api.NodeLease
		sent := time.Now()
		_, err := n.cli.Load().Do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(n.name)+"/heartbeat", nil,
			api.NodeHeartbeat{Instance: n.instance}, &l)
		switch {
		case err == nil:
			n.grant(ctx, sent, l)
		case ctx.Err() != nil:
		case client.IsNotFound(err) || (client.IsUnauthorized(err) && n.sim.join != nil):
			n.sim.log.Warn("schedd does not know this node (or its credential), registering again", "node", n.name, "err", err)
			_ = n.register(ctx)
		default:
			n.sim.log.Warn("heartbeat failed", "node", n.name, "err", err)
		}
	}
}

func (n *node) heartbeatEvery() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.every
	if d <= 0 {
		d = defaultHeartbeat
	}
	if m := n.sim.cfg.Heartbeat; m > 0 && m < d {
		d = m
	}
	return d
}

// grant records a lease granted in answer to a request sent at sent, as
// nodelet's lease keeper does (its fence is the container's timer here);
// when the lease had run out, the containers that waited for it start.
func (n *node) grant(ctx context.Context, sent time.Time, l api.NodeLease) {
	n.mu.Lock()
	defer n.mu.Unlock()
	expired := n.expiredLocked()
	n.every = l.Heartbeat
	if l.Lease <= 0 {
		n.unfenced = true
	} else {
		until := sent.Add(l.Lease)
		if n.unfenced || until.After(n.lease) {
			n.lease = until
		}
		n.unfenced = false
	}
	if expired && !n.expiredLocked() {
		n.reconcileLocked(ctx)
	}
}

// expiredLocked reports whether the lease has run out; n.mu is held.
func (n *node) expiredLocked() bool {
	return !n.unfenced && !time.Now().Before(n.lease)
}

// leaseEnd is when the lease runs out; zero without one.
func (n *node) leaseEnd() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.unfenced {
		return time.Time{}
	}
	return n.lease
}

// loop follows the node's assignments with blocking queries until ctx
// ends, as nodelet's.
func (n *node) loop(ctx context.Context) {
	var index uint64
	b := report.Backoff()
	for ctx.Err() == nil {
		as, err := n.cli.Load().Assignments(ctx, n.name, index, assignmentsWait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			n.sim.log.Warn("assignments query failed", "node", n.name, "err", err)
			_ = b.Wait(ctx)
			continue
		}
		b.Reset()
		n.mu.Lock()
		n.last = as.Assignments
		n.reconcileLocked(ctx)
		n.mu.Unlock()
		if as.Index == 0 || as.Index == index {
			_ = b.Wait(ctx) // a schedd without blocking queries: do not spin
		}
		index = as.Index
	}
}

// reconcileLocked makes the node's containers match its last
// assignments, by nodelet's rules (nodelet/reconcile.go): stop what is
// no longer wanted or whose job is being killed, start what is assigned
// (once the lease allows), report the rest. n.mu is held.
func (n *node) reconcileLocked(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	want := map[key]api.AssignedJob{}
	for _, asg := range n.last {
		for _, h := range asg.Hosts {
			want[key{asg.Job.ID, h, asg.Job.Requeues}] = asg.Job
		}
	}
	for k, c := range n.running {
		if job, ok := want[k]; !ok || job.KillWanted {
			c.requestStop()
		}
	}
	for k := range n.finished {
		if _, ok := want[k]; !ok {
			delete(n.finished, k)
		}
	}
	for k, job := range want {
		if n.running[k] == nil && !n.finished[k] && !n.earlierRunHere(k) {
			n.admit(ctx, k, job)
		}
	}
}

// earlierRunHere reports whether an earlier run of k's container is
// still stopping here; n.mu is held.
func (n *node) earlierRunHere(k key) bool {
	for r := range n.running {
		if r.job == k.job && r.host == k.host && r.run != k.run {
			return true
		}
	}
	return false
}

// admit decides about one container not running here; n.mu is held.
func (n *node) admit(ctx context.Context, k key, job api.AssignedJob) {
	c, err := session.Container(job, k.host)
	if err != nil {
		n.sim.log.Error("assignment names a host the job lacks", "node", n.name, "job", k.job, "host", k.host)
		return
	}
	switch {
	case c.State.Ended():
	case job.KillWanted:
		n.endHere(k, api.ContainerKilled, "killed before it started")
	case c.State == api.ContainerAssigned || c.State == api.ContainerPending || c.State == "":
		if n.expiredLocked() {
			return // a fence would kill it: start once schedd grants a lease
		}
		n.start(ctx, k, job)
	default:
		n.endHere(k, api.ContainerFailed, "container lost: the nodelet restarted while it was "+string(c.State))
	}
}

// endHere reports a final state for a container that never ran here;
// n.mu is held.
func (n *node) endHere(k key, state api.ContainerState, msg string) {
	n.finished[k] = true
	n.rep.Add(api.ContainerUpdate{JobID: k.job, Host: k.host, Requeues: k.run, State: state, Message: msg})
}
