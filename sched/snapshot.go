package sched

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched/admission"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/partition"
	"github.com/troupe-hpc/troupe/sched/state"
)

// coreSnapshot is the core's input, built from the state alone (and the
// config in it):
//
//   - nodes that are up and belong to a partition, with their free
//     resources, GPU devices and partitions;
//   - pending and held jobs with their submit time, walltime (the row's,
//     the one in force, defaults resolved at submit), fair-share
//     factor, nice, partition, user, account path (with an account
//     tree) and dependency, and the state of every job a dependency
//     names (core.Snapshot.Named): the core decides Held, Dependency,
//     DependencyNeverSatisfied and PartitionLimit itself;
//   - started jobs with their start, walltime, user and live
//     containers, for backfill and the per-user limits, and the
//     licenses they hold (state.HoldsLicenses), with the counts of the
//     config's license blocks: the core derives what is free from them
//     on every pass;
//   - for each job array with a throttle, how many more of its elements
//     may start (its own row is not queued: its elements are);
//   - each partition's tier, GPU quantum, starvation
//     threshold, per-user limits (the core enforces them: a job past
//     its user's waits AccountLimit) and limits on each job
//     (max_walltime, max_cluster_size, allowed_modes, allowed_accounts;
//     a partition a job names that the config no longer has is closed),
//     and the policy (weights,
//     reservation depth, and for the fairshare policy the rest of
//     core.DefaultPolicy).
func coreSnapshot(v *state.Snapshot, empty []core.Node, now time.Time) core.Snapshot {
	cfg := v.Config()
	jobs := v.LiveJobs() // by the state index: ended jobs waiting for their purge cost nothing
	pending := 0
	for _, j := range jobs {
		if j.State == api.JobPending {
			pending++
		}
	}
	users := make([]string, 0, pending)
	for _, j := range jobs {
		if queued(j) {
			users = append(users, j.User)
		}
	}
	_, factors := fairShare(cfg, v.Usage(), users)
	snap := snapshotFrame(v, cfg)
	fillSnapshot(&snap, v, cfg, empty, jobs, factors, now)
	return snap
}

// snapshotFrame is the core's input but for the jobs and nodes: the
// partitions, QOSes, policy, reservations and licenses of cfg.
func snapshotFrame(v *state.Snapshot, cfg *partition.Config) core.Snapshot {
	snap := core.Snapshot{
		Partitions:   map[string]core.Partition{},
		Policy:       corePolicy(cfg),
		Reservations: coreReservations(v.Reservations()),
		Licenses:     cfg.LicenseCounts(),
	}
	for _, p := range cfg.Partitions {
		snap.Partitions[p.Name] = core.Partition{Tier: float64(p.PriorityTier), GPUQuantum: p.GPUQuantum,
			StarvationAge: p.Starvation(), UserLimits: admission.Limits(p.UserLimits), Jobs: admission.JobLimits(cfg, &p),
			PreemptMode: p.PreemptMode, PreemptExempt: p.PreemptExemptTime}
	}
	snap.QOS = coreQOS(cfg)
	return snap
}

// fillSnapshot puts jobs (live, in id order) in snap: the nodes' free
// resources less what they hold, the queue (factors are the fair-share
// factors), the running jobs and the arrays' throttles.
func fillSnapshot(snap *core.Snapshot, v *state.Snapshot, cfg *partition.Config, empty []core.Node, jobs []*state.Job, factors map[string]float64, now time.Time) {
	snap.Nodes = coreNodes(empty, jobs)
	pending := 0
	for _, j := range jobs {
		if j.State == api.JobPending {
			pending++
		}
	}
	// Sized once: a backlog of 100,000 pending jobs grown by append was
	// most of a pass's time (copying the queue as it grew).
	snap.Queue = make([]core.Job, 0, pending)
	for _, j := range jobs {
		switch {
		case j.Array != nil:
			// An array's own row runs nothing: its elements are queued
			// as jobs; a throttle gives the core its slots.
			if a := j.Array; a.MaxRunning > 0 && !j.State.Terminal() {
				if snap.ArraySlots == nil {
					snap.ArraySlots = map[uint64]int{}
				}
				snap.ArraySlots[j.ID] = max(0, a.MaxRunning-a.Started())
			}
		case j.State == api.JobHeld || j.Adopting():
			// Held (bsub -H, bhold): the core gives it Held, its reason
			// already, and ranks it not. A queued job with a container a
			// node runs (adopted after a restore) is held alike: it is
			// never placed a second time.
			cj := coreJob(j)
			cj.Held = true
			snap.Queue = append(snap.Queue, cj)
			if state.HoldsLicenses(j) {
				// An adopted job's containers run: it holds its
				// licenses, though it is not placed.
				snap.Running = append(snap.Running, core.Running{JobID: j.ID, Start: now, Walltime: j.Walltime, Licenses: j.Licenses})
			}
		case j.State == api.JobPending:
			cj := coreJob(j)
			cj.FairShare = jobFactor(factors, j.Account, j.User)
			if j.DependsOn != nil {
				if snap.Named == nil {
					snap.Named = map[core.JobRef]core.JobStatus{}
				}
				cj.Depends = coreDependency(v, dependencyView(j.DependsOn), snap.Named)
			}
			if cfg.HasTree() {
				cj.Accounts = cfg.AccountPath(j.Account)
			}
			if _, ok := snap.Partitions[j.Partition]; !ok {
				snap.Partitions[j.Partition] = core.Partition{Jobs: core.JobLimits{Closed: true}}
			}
			snap.Queue = append(snap.Queue, cj)
		case !j.State.Terminal() && j.State != api.JobHeld:
			snap.Running = append(snap.Running, coreRunning(j, now))
		}
	}
}

// corePolicy turns the config's policy into the core's.
func corePolicy(cfg *partition.Config) core.Policy {
	p := core.Policy{ReservationDepth: cfg.ReservationDepth, MaxAge: cfg.Weights.MaxAge, PreemptWindow: cfg.Window(), PreemptDepth: cfg.Depth(),
		QueueDepth: cfg.Queue()}
	switch cfg.Policy {
	case partition.PolicyFCFS:
		p.ReservationDepth = 0
	case partition.PolicyEASY:
		p.ReservationDepth = max(1, cfg.ReservationDepth)
	default:
		w := cfg.Weights
		p.Weights = core.Weights{Age: w.Age, FairShare: w.FairShare, JobSize: w.JobSize, Partition: w.Tier, QOS: w.QOS}
		p.FavorSmall = w.FavorSmall
		// The rest of core.DefaultPolicy: the head keeps its reservation,
		// jobs past their partition's starvation threshold go first, and
		// backfill tries the shortest jobs first.
		p.KeepReservations = true
		p.ShortestFirst = true
		p.StarvationAge = core.DefaultStarvationAge
	}
	return p
}

// coreNodes is the core's view of the nodes that take work: empty (from
// the node cache) less what the live containers of jobs hold, GPU devices
// included. A suspended job's containers hold their memory only: their
// CPUs and GPUs are free for other jobs while they are frozen (heldRes).
func coreNodes(empty []core.Node, jobs []*state.Job) []core.Node {
	type held struct {
		res  core.Res
		devs map[int]float64
	}
	use := map[string]*held{}
	for _, j := range jobs {
		if j.State.Terminal() {
			continue
		}
		for _, c := range j.Containers {
			if c.Node == "" || c.State.Ended() {
				continue
			}
			h := use[c.Node]
			if h == nil {
				h = &held{}
				use[c.Node] = h
			}
			h.res = h.res.Add(heldRes(j, &c))
			if j.Suspended != nil {
				continue
			}
			for _, g := range c.GPUs {
				if h.devs == nil {
					h.devs = map[int]float64{}
				}
				h.devs[g.Device] += g.Share
			}
		}
	}
	out := make([]core.Node, len(empty))
	copy(out, empty)
	for i := range out {
		h := use[out[i].Name]
		if h == nil {
			continue
		}
		n := &out[i]
		n.Free = n.Free.Sub(h.res)
		if len(n.Devices) > 0 {
			n.Devices = slices.Clone(n.Devices)
			n.Free.GPU = 0
			for d := range n.Devices {
				n.Devices[d].Free = math.Max(0, 1-h.devs[n.Devices[d].ID])
				n.Free.GPU += n.Devices[d].Free
			}
		}
	}
	return out
}

// partitionedNodes lists the nodes that take work, empty: up and in at
// least one partition (the core reads an empty list as "all"), whole GPUs
// as devices. The node cache keeps its answer.
func partitionedNodes(v *state.Snapshot, cfg *partition.Config) []core.Node {
	var out []core.Node
	for _, n := range v.Nodes() {
		if n.State != api.NodeUp {
			continue
		}
		var parts []string
		for i := range cfg.Partitions {
			if p := &cfg.Partitions[i]; p.Has(n.Name, n.Labels) {
				parts = append(parts, p.Name)
			}
		}
		if len(parts) == 0 {
			continue
		}
		c := toCore(n.Capacity)
		cn := core.Node{Name: n.Name, Capacity: c, Free: c, Partitions: parts}
		if whole := int(math.Floor(n.Capacity.GPU + 1e-9)); whole >= 1 {
			cn.Free.GPU = 0
			for d := 0; d < whole; d++ {
				cn.Devices = append(cn.Devices, core.Device{ID: d, Free: 1})
				cn.Free.GPU++
			}
		}
		out = append(out, cn)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out
}

// heldRes is what container c of job j holds of its node: all it asked for
// while it runs, its memory alone while the job is suspended.
func heldRes(j *state.Job, c *state.Container) core.Res {
	r := toCore(c.Res())
	if j.Suspended != nil {
		return core.Res{Memory: r.Memory}
	}
	return r
}

func toCore(r state.Resources) core.Res {
	return core.Res{CPUMilli: r.CPUMilli, Memory: r.Memory, GPU: r.GPU}
}

func coreJob(j *state.Job) core.Job {
	cj := core.Job{ID: j.ID, Mode: j.Spec.Cluster.Mode, Reason: j.Reason, Partition: j.Partition,
		User: j.User, Account: j.Account, Submit: j.Submitted, Walltime: j.Walltime, Array: j.ArrayID,
		Exclude: j.ExcludeNodes, Reservation: j.Reservation, Licenses: j.Licenses, QOS: j.QOS}
	if cj.Mode == "" {
		cj.Mode = jobspec.ModeSingleNode
	}
	if j.Spec.Priority < 0 {
		cj.Nice = float64(-j.Spec.Priority)
	}
	for _, c := range j.Containers {
		cj.Containers = append(cj.Containers, toCore(c.Res()))
	}
	return cj
}

// coreRunning is a started (or placed) job for backfill: a job still
// starting counts from now. Its walltime is stretched by the time it
// spent suspended; a suspended job holds its memory only, and no GPU.
func coreRunning(j *state.Job, now time.Time) core.Running {
	r := core.Running{JobID: j.ID, Start: j.Started, Walltime: j.Walltime, Partition: j.Partition, User: j.User,
		QOS: j.QOS, StoppingFor: j.Stopping(), Suspended: j.Suspended != nil}
	if j.Preempt != nil {
		r.Preempted = j.Preempt.At
	}
	if r.Walltime > 0 {
		r.Walltime += j.SuspendedFor
		if sp := j.Suspended; sp != nil && now.After(sp.Since) {
			r.Walltime += now.Sub(sp.Since)
		}
	}
	if state.HoldsLicenses(j) {
		r.Licenses = j.Licenses
	}
	if r.Start.IsZero() {
		r.Start = now
	}
	for _, c := range j.Containers {
		if c.Node == "" || c.State.Ended() {
			continue
		}
		r.Nodes = append(r.Nodes, c.Node)
		r.Containers = append(r.Containers, heldRes(j, &c))
		var gs []core.GPUShare
		for _, g := range c.GPUs {
			if j.Suspended != nil {
				break
			}
			gs = append(gs, core.GPUShare{Device: g.Device, Share: g.Share})
		}
		r.GPUs = append(r.GPUs, gs)
	}
	return r
}

func fromCore(p core.Plan) *state.Plan {
	out := &state.Plan{}
	for _, pl := range p.Placements {
		sp := state.Placement{JobID: pl.JobID, Nodes: pl.Nodes}
		for _, gs := range pl.GPUs {
			var row []state.GPUShare
			for _, g := range gs {
				row = append(row, state.GPUShare{Device: g.Device, Share: g.Share})
			}
			sp.GPUs = append(sp.GPUs, row)
		}
		out.Placements = append(out.Placements, sp)
	}
	for _, r := range p.Reasons {
		out.Reasons = append(out.Reasons, state.Reason{JobID: r.JobID, Reason: r.Reason})
	}
	for _, pr := range p.Preemptions {
		out.Preemptions = append(out.Preemptions, state.Preemption{Victim: pr.Victim, By: pr.By, Mode: pr.Mode})
	}
	return out
}

// coreQOS is the core's form of the config's QOSes; nil when none.
func coreQOS(cfg *partition.Config) map[string]core.QOS {
	if len(cfg.QOS) == 0 {
		return nil
	}
	out := make(map[string]core.QOS, len(cfg.QOS))
	for _, q := range cfg.QOS {
		out[q.Name] = core.QOS{Priority: q.Priority, Preempt: q.Preempt, PreemptMode: q.PreemptMode,
			UserLimits: core.Limits{Jobs: q.MaxJobsPerUser, Res: core.Res{CPUMilli: q.MaxCPUMilli(), GPU: q.MaxGPUPerUser}}}
	}
	return out
}

// noPreemption turns every preemption mode of snap off: the core then
// preempts no job.
func noPreemption(snap *core.Snapshot) {
	for name, p := range snap.Partitions {
		p.PreemptMode = ""
		snap.Partitions[name] = p
	}
	for name, q := range snap.QOS {
		q.PreemptMode = ""
		snap.QOS[name] = q
	}
}
