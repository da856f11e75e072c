// Package reason is the one vocabulary of why a job waits (its pending
// reasons, as Slurm names them) and why a node is down. schedd, the
// scheduling core, the /v1 API and the command-line tools all spell them
// from here. It imports only the standard library, so the pure core
// (sched/core) may import it too; add a reason here, never as a string
// elsewhere.
package reason

// Pending reasons, as Slurm names them. Which one a waiting job shows is
// the scheduling core's (sched/core) to decide, every one of them: each
// pass gives every queued job its stages' verdict (eligible: Held,
// Dependency, DependencyNeverSatisfied, PartitionLimit; limits:
// JobArrayTaskLimit, AccountLimit; licenses: Licenses; placement and
// backfill: Resources, Priority). Until the next pass a job shows what
// Waiting decides from what the act that changed it knows (its
// submission, a hold, a release, a requeue, an array element's row), in
// the stages' order: one decision, made by schedd, the replicated
// state's transitions and bsim alike.
const (
	// Resources: the job waits for nodes to free up.
	Resources = "Resources"
	// Priority: jobs ranked ahead of it go first.
	Priority = "Priority"
	// PartitionLimit: the job asks for more than its partition allows.
	PartitionLimit = "PartitionLimit"
	// AccountLimit: starting the job would take its user past a per-user
	// limit of its partition.
	AccountLimit = "AccountLimit"
	// Dependency: the job waits for other jobs (bsub -w).
	Dependency = "Dependency"
	// Held: the job was submitted or put on hold (bhold).
	Held = "Held"
	// DependencyNeverSatisfied: a dependency that can never be satisfied
	// (done(12) but job 12 FAILED); the job waits until killed.
	DependencyNeverSatisfied = "DependencyNeverSatisfied"
	// ArrayTaskLimit: an array element waits because its array runs as
	// many elements as its max_running allows (Slurm's name).
	ArrayTaskLimit = "JobArrayTaskLimit"
	// Preempting: the job waits for the running jobs it preempted to
	// stop; what they free is reserved for it.
	Preempting = "Preempting"
	// Preempted: the job was stopped for a more urgent one and waits to
	// run again (a requeued victim, until the next pass ranks it).
	Preempted = "Preempted"
	// Reservation: the job runs in a reservation (bsub --reservation)
	// whose window has not begun, or whose window or nodes cannot take
	// it now.
	Reservation = "Reservation"
	// ReservationDeleted: the reservation the job names no longer exists;
	// the job waits until killed or moved.
	ReservationDeleted = "ReservationDeleted"
	// Maintenance: the nodes the job would take are set aside by a
	// maintenance reservation (flags maint) that begins before the job
	// would end.
	Maintenance = "ReqNodeNotAvail, Reserved for maintenance"
	// reservedPrefix starts the reason of a job held back by another
	// reservation: ReservedFor(name).
	reservedPrefix = "ReqNodeNotAvail, reserved for "
	// Licenses: the job waits for licenses (partitions.hcl's license
	// blocks) that running jobs hold.
	Licenses = "Licenses"
)

// ReservedFor is the reason of a job that would fit now but for
// reservation name, which holds the nodes before the job would end.
func ReservedFor(name string) string { return reservedPrefix + name }

// HeldByReservation reports whether r says a reservation holds the job
// back from nodes it would otherwise take (Maintenance or ReservedFor).
func HeldByReservation(r string) bool {
	return r == Maintenance || (len(r) > len(reservedPrefix) && r[:len(reservedPrefix)] == reservedPrefix)
}

// Pending lists every pending reason.
var Pending = []string{Resources, Priority, PartitionLimit, AccountLimit, Dependency, Held, DependencyNeverSatisfied, ArrayTaskLimit, Reservation, ReservationDeleted, Maintenance, Licenses,
	Preempting, Preempted}

// IsPending reports whether r is one of the pending reasons (the others a
// job shows are end causes and messages, free text).
func IsPending(r string) bool {
	switch r {
	case Resources, Priority, PartitionLimit, AccountLimit, Dependency, Held, DependencyNeverSatisfied, ArrayTaskLimit, Reservation, ReservationDeleted, Maintenance, Licenses,
		Preempting, Preempted:
		return true
	}
	return HeldByReservation(r)
}

// NotResponding is the reason a DOWN node shows, as Slurm's.
const NotResponding = "Not responding"

// Waiting is the reason a job shows from an act that changes it (its
// submission, an array element's row made) until the next pass gives
// it the stages' own verdict: held ──► Held; a dependency ──►
// Dependency (the eligible stage tells, from the jobs it names, whether
// it can still be met); an element of an array already running as many
// as its max_running allows ──► JobArrayTaskLimit; else Priority, as
// the walk gives a job it has not reached. The order is the stages':
// eligible before limits before placement. schedd, the replicated state's
// transitions (a hold, a release, a requeue, an array element's row) and
// bsim all spell a waiting job's reason through here, so that the
// interim verdict is decided in one place and the pass's in the core.
func Waiting(held, dependent, throttled bool) string {
	switch {
	case held:
		return Held
	case dependent:
		return Dependency
	case throttled:
		return ArrayTaskLimit
	}
	return Priority
}
