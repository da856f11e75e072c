package core

import "time"

// The pending reasons the core gives are package reason's: Held,
// Dependency, DependencyNeverSatisfied and PartitionLimit from the
// eligible stage (eligible.go), JobArrayTaskLimit and AccountLimit from
// the limits stage (limits.go), Licenses from the license stage
// (licenses.go), Priority and Resources from placement and backfill.

// Cluster modes (the same strings as jobspec.Mode*).
const (
	ModeSingleNode = "single-node"
	ModeMultiNode  = "multi-node"
)

// Res is an amount of schedulable resources.
type Res struct {
	CPUMilli int64
	Memory   int64   // bytes
	GPU      float64 // GPUs; fractions are shares of one device
}

// Add returns r + o.
func (r Res) Add(o Res) Res {
	return Res{r.CPUMilli + o.CPUMilli, r.Memory + o.Memory, r.GPU + o.GPU}
}

// Sub returns r - o.
func (r Res) Sub(o Res) Res {
	return Res{r.CPUMilli - o.CPUMilli, r.Memory - o.Memory, r.GPU - o.GPU}
}

// Covers reports whether r has room for o.
func (r Res) Covers(o Res) bool {
	return r.CPUMilli >= o.CPUMilli && r.Memory >= o.Memory && r.GPU+gpuEps >= o.GPU
}

// gpuEps absorbs float rounding in GPU shares (quanta are ≥ 0.01).
const gpuEps = 1e-9

// Device is one GPU of a node as the core sees it.
type Device struct {
	// ID is the node-local device index (the CUDA_VISIBLE_DEVICES ordinal).
	ID int
	// Free is the unallocated share of the device, in [0, 1].
	Free float64
}

// GPUShare is a slice of one device given to one container.
type GPUShare struct {
	Device int     // Device.ID on the container's node
	Share  float64 // in (0, 1]; 1 is the whole device
}

// Node is a node that may take work.
type Node struct {
	// Name is unique in the snapshot.
	Name string
	// Capacity is what the node has in all.
	Capacity Res
	// Free is what is not allocated now. When Devices is set, Free.GPU
	// should be the sum of their Free; the core trusts Devices for GPUs.
	Free Res
	// Devices lists the node's GPUs with their free shares. Nil means
	// GPUs are one undivided pool (Free.GPU), as before fGPU; placements
	// on such a node name no devices.
	Devices []Device
	// Partitions the node belongs to. Empty: every partition.
	Partitions []string
}

// Job is a pending job.
type Job struct {
	// ID is the job id; ids grow with submission.
	ID uint64
	// Mode is ModeSingleNode (the default when empty) or ModeMultiNode.
	Mode string
	// Containers are per-container requests in rank order (main1 first).
	// GPU requests ≤ 1 come from one device, > 1 in whole devices.
	Containers []Res
	// Reason is the job's current pending reason; the plan reports only
	// changes to it.
	Reason string
	// Partition the job runs in. Empty: any node.
	Partition string
	// User is whose job it is: Partition.UserLimits count per user.
	// Account is informational for the core (fair share is already in
	// FairShare); it shows in transcripts and simulations.
	User, Account string
	// Submit is when the job was queued; the age factor grows from it.
	Submit time.Time
	// Walltime is the job's limit, the one in force: the caller has
	// resolved any default (schedd at submit, into the job's row). Zero:
	// none; the job is expected to run for a year, so it never backfills
	// ahead of a reservation.
	Walltime time.Duration
	// Nice lowers the priority by that many points (Slurm --nice); ≥ 0.
	Nice float64
	// FairShare is the fair-share factor F = 2^(−U/S) of the job's
	// association, in [0, 1], as sched/fairshare computes it.
	FairShare float64
	// Held marks a held job (bsub -H, bhold): it waits with reason.Held
	// until released.
	Held bool
	// Depends, when set, is the job's dependency (bsub -w): the job waits
	// with reason.Dependency until the jobs it names (Snapshot.Named)
	// satisfy it, with reason.DependencyNeverSatisfied once they cannot.
	Depends *Dependency
	// Accounts is the job's account and the accounts above it, for a
	// partition's Limits.Accounts; nil when the site has no account tree.
	Accounts []string
	// Array, when not 0, is the job array the job is an element of: it
	// starts only while Snapshot.ArraySlots has room for its array.
	Array uint64
	// Exclude names nodes the job must not be placed on (a node whose
	// health check failed while the job ran there): placement and
	// backfill leave them out for this job alone.
	Exclude []string
	// QOS is the job's quality of service (Snapshot.QOS): its priority
	// adds to the job's, its per-user limits apply, and its Preempt list
	// names the QOSes the job may preempt. "": none.
	QOS string
	// Reservation, when set, names the reservation (Snapshot.Reservations)
	// the job runs in: only on its nodes, only while its window is open.
	Reservation string
	// Licenses are the site-wide counts the job holds while it runs, by
	// name (Snapshot.Licenses): it starts only when all are free.
	Licenses map[string]int
}

// Running is a job that holds resources now. Backfill uses it to know
// when resources come back.
type Running struct {
	JobID uint64
	// Start is when the job was placed.
	Start time.Time
	// Walltime is its limit; zero as for Job.Walltime. The job is
	// expected to end at Start+Walltime; one past that is expected any
	// moment (now).
	Walltime time.Duration
	// Partition the job runs in (for its user's limits there).
	Partition string
	// User whose job it is: it counts toward the user's
	// Partition.UserLimits while it runs.
	User string
	// Nodes[i] holds container i, which uses Containers[i].
	Nodes      []string
	Containers []Res
	// GPUs[i] are container i's device shares; nil when none or unknown.
	GPUs [][]GPUShare
	// QOS is the job's quality of service.
	QOS string
	// StoppingFor, when not 0, is the pending job this one was preempted
	// for: it is being stopped (its resources are expected back now) and
	// is no candidate for another preemption.
	StoppingFor uint64
	// Suspended: the job is frozen (Containers hold its memory alone),
	// and stays so until the CPUs and GPUs it lent are free again; it
	// is not expected to end when StoppingFor is set.
	Suspended bool
	// Preempted is when the job was last preempted (zero: never): it is
	// not preempted again within Policy.PreemptWindow of it.
	Preempted time.Time
	// Licenses the job holds until it ends (Job.Licenses).
	Licenses map[string]int
}

// Partition is what the core needs of a partition.
type Partition struct {
	// Tier is the partition's priority tier (Slurm PriorityJobFactor);
	// the partition factor is Tier over the highest Tier in the snapshot.
	Tier float64
	// GPUQuantum is the fGPU step: requests ≤ 1 round up to a multiple of
	// it. Zero: no rounding.
	GPUQuantum float64
	// StarvationAge is the partition's starvation threshold: a job of it
	// pending this long holds a reservation (see Policy.StarvationAge).
	// Zero: the policy's; negative: none in this partition.
	StarvationAge time.Duration
	// UserLimits caps what the running jobs of one user may hold in the
	// partition at once.
	UserLimits Limits
	// Jobs are the partition's limits on each job: a job past one waits
	// with reason.PartitionLimit (the eligible stage).
	Jobs JobLimits
	// PreemptMode is how the partition's running jobs are preempted
	// (PreemptCancel, PreemptRequeue, PreemptSuspend); "" or PreemptOff:
	// they are not. A job's QOS may override it (QOS.PreemptMode).
	PreemptMode string
	// PreemptExempt: a job of the partition that has run less than this
	// is not preempted.
	PreemptExempt time.Duration
}

// Preemption modes (the same strings as partitions.hcl's preempt_mode).
const (
	PreemptOff     = "off"
	PreemptCancel  = "cancel"
	PreemptRequeue = "requeue"
	PreemptSuspend = "suspend"
)

// QOS is what the core needs of a quality of service.
type QOS struct {
	// Priority adds Weights.QOS × Priority / (highest QOS priority) to
	// its jobs' priority, and ranks victims: a job of a lower QOS
	// priority is preempted first, one of an equal or higher one never
	// by a QOS preemption.
	Priority float64
	// Preempt are the QOSes whose running jobs this QOS's pending jobs
	// may preempt.
	Preempt []string
	// PreemptMode overrides the partition's for the QOS's jobs; "":
	// the partition's.
	PreemptMode string
	// UserLimits cap what one user's running jobs of the QOS hold at
	// once, across partitions (max_jobs_per_user, max_cpu_per_user,
	// max_gpu_per_user); a job past them waits with reason.AccountLimit.
	UserLimits Limits
}

// JobLimits are what a partition takes (partitions.hcl's max_walltime,
// max_cluster_size, allowed_modes, allowed_accounts). A job outside them
// waits with reason.PartitionLimit, blocking nobody. Zero fields take all.
type JobLimits struct {
	// Closed: the partition takes no job at all (the configuration no
	// longer has it).
	Closed bool
	// MaxWalltime bounds Job.Walltime.
	MaxWalltime time.Duration
	// MaxSize bounds the containers of one job.
	MaxSize int
	// Modes are the cluster modes taken (a Job.Mode of "" is
	// ModeSingleNode).
	Modes []string
	// Accounts are the accounts taken: a job is taken when one of its
	// Job.Accounts is here.
	Accounts []string
}

// Limits cap what one user's running jobs (Snapshot.Running, by
// Running.User and Running.Partition) hold in one partition, together with
// what the pass starts. A job that would take its user past one waits with
// reason.AccountLimit: it blocks nobody and holds no reservation. Zero
// fields are unlimited.
type Limits struct {
	// Jobs is the most running jobs.
	Jobs int
	// Res is the most resources, per field (CPUMilli, Memory, GPU).
	Res Res
}

// exceeded reports whether holding jobs jobs and r goes past l.
func (l Limits) exceeded(jobs int, r Res) bool {
	return (l.Jobs > 0 && jobs > l.Jobs) ||
		(l.Res.CPUMilli > 0 && r.CPUMilli > l.Res.CPUMilli) ||
		(l.Res.Memory > 0 && r.Memory > l.Res.Memory) ||
		(l.Res.GPU > 0 && r.GPU > l.Res.GPU+gpuEps)
}

// set reports whether l limits anything.
func (l Limits) set() bool { return l != Limits{} }

// Weights are the multifactor priority weights (Slurm PriorityWeight*).
// A job's priority is Σ weight × factor − Nice, each factor in [0, 1].
type Weights struct {
	Age       float64
	FairShare float64
	JobSize   float64
	Partition float64
	QOS       float64
}

// Policy is the scheduling policy. The zero Policy is strict FIFO in
// queue order without backfill, the skeleton's behaviour.
type Policy struct {
	// Weights of the priority factors. All zero: queue order as given.
	Weights Weights
	// MaxAge is where the age factor reaches 1. Zero: 7 days.
	MaxAge time.Duration
	// FavorSmall makes the job-size factor favour small jobs (Slurm
	// PriorityFavorSmall); otherwise it favours large ones.
	FavorSmall bool
	// ReservationDepth is how many blocked jobs, in priority order, get a
	// reservation that lower jobs may not delay. 0: no backfill (the
	// first blocked job blocks all behind it); 1: EASY; larger: toward
	// conservative backfill.
	ReservationDepth int
	// MaxBackfillJobs bounds how many jobs below the first reservation a
	// pass tries (Slurm bf_max_job_test). Zero: all.
	MaxBackfillJobs int
	// QueueDepth bounds how many pending jobs of each partition one
	// pass tries (Slurm's default_queue_depth and bf_max_job_test, per
	// partition as bf_max_job_part): the jobs that keep a reservation
	// (KeepReservations) always, then the first QueueDepth of each
	// partition's others in the pass's order (those past the starvation
	// threshold oldest first, then by priority), and each partition's
	// job of highest priority whatever the depth. The others keep their
	// reason and are tried on a later pass, as the jobs ahead of them
	// start. Per partition, so that a partition whose queue cannot
	// start does not keep another's jobs from being tried. Zero: all.
	QueueDepth int
	// KeepReservations makes a reservation last until its job starts: a
	// job whose Reason is Resources (it got a reservation in an earlier
	// pass) keeps one, ahead of every job without, even of higher
	// priority. Without it, the reservations go to the first blocked jobs
	// of every pass anew, and a higher-priority newcomer takes them.
	KeepReservations bool
	// StarvationAge is the starvation threshold: a job pending at least
	// this long holds a reservation, on top of ReservationDepth, that
	// backfill and later jobs may not delay (conservative backfill for
	// aged jobs). Reserved jobs, kept and aged, are served oldest first.
	// Needs ReservationDepth > 0. Zero: no threshold.
	StarvationAge time.Duration
	// ShortestFirst tries the jobs below the reservations (the backfill
	// candidates) shortest walltime first, ties in priority order; the
	// reservations still go by priority.
	ShortestFirst bool
	// PreemptWindow: a job preempted less than this ago is not preempted
	// again (no thrashing). Zero: no window.
	PreemptWindow time.Duration
	// PreemptDepth bounds how many pending jobs may choose victims in
	// one pass, in priority order (Slurm's bounded queue depth): the
	// others wait with their reason and are tried on the next pass, the
	// first of them first. Zero: no bound.
	PreemptDepth int
}

// Snapshot is everything the core may look at. The core does not modify
// it or keep references into it after Schedule returns.
type Snapshot struct {
	// Nodes that may take work (up, not drained). Order is irrelevant.
	Nodes []Node
	// Queue is the pending jobs; ties in priority keep this order.
	Queue []Job
	// Running jobs; needed for backfill only.
	Running []Running
	// Partitions by name; a name missing here has the zero Partition.
	Partitions map[string]Partition
	// Policy is how to order and backfill.
	Policy Policy
	// ArraySlots is, per job array with a throttle (max_running), how
	// many more of its elements may start now: a pass starts no more,
	// and an element past them waits with reason.ArrayTaskLimit,
	// blocking nobody. An array missing here has no throttle.
	ArraySlots map[uint64]int
	// Named is what the eligible stage knows of each job (or array
	// element) that a queued job's dependency names. A job named but
	// missing here is taken as gone: the dependency can never be met.
	Named map[JobRef]JobStatus
	// QOS are the qualities of service by name; a name missing here has
	// the zero QOS.
	QOS map[string]QOS
	// Reservations set nodes aside for windows of time (reservation.go):
	// no job outside one runs on its nodes across its window.
	Reservations []Reservation
	// Licenses are the site's counts by name (partitions.hcl's license
	// blocks): the running jobs never hold more of one than its count
	// together. A license missing here has none.
	Licenses map[string]int
}

// Placement puts every container of one job: Nodes[i] holds container i.
type Placement struct {
	JobID uint64
	Nodes []string
	// GPUs[i] are the device shares of container i (nil: no devices
	// named, either no GPU or a node without Devices). Nil when no
	// container got devices.
	GPUs [][]GPUShare
	// Backfilled marks a job that started ahead of a reserved one.
	Backfilled bool
}

// ReasonChange sets a pending job's reason.
type ReasonChange struct {
	JobID  uint64
	Reason string
}

// StartEstimate is when a reserved job is expected to start and where,
// given the walltimes of what runs (bqueue --start).
type StartEstimate struct {
	JobID uint64
	Start time.Time
	Nodes []string
}

// Plan is the core's answer.
type Plan struct {
	// Placements to commit, in the order they were decided.
	Placements []Placement
	// Reasons that change.
	Reasons []ReasonChange
	// Starts of the reserved jobs. Informational and recomputed on every
	// pass (they move with now); Empty ignores them, so callers keep them
	// out of the replicated log.
	Starts []StartEstimate
	// Preemptions are the running jobs to stop (or suspend) for pending
	// ones, in the order decided.
	Preemptions []Preemption
}

// Preemption is one running job stopped for a pending one.
type Preemption struct {
	// Victim is the running job to stop, By the pending job it is
	// stopped for.
	Victim, By uint64
	// Mode is PreemptCancel, PreemptRequeue or PreemptSuspend: what
	// becomes of the victim.
	Mode string
}

// Empty reports whether the plan changes nothing that must be committed.
func (p Plan) Empty() bool {
	return len(p.Placements) == 0 && len(p.Reasons) == 0 && len(p.Preemptions) == 0
}
