package state

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
	"github.com/troupe-hpc/troupe/internal/reason"
	"github.com/troupe-hpc/troupe/sched/fault"
)

// Errors Apply returns; the API maps them to HTTP statuses.
var (
	ErrNotFound = fault.ErrNotFound
	ErrEnded    = fault.ErrEnded
	// ErrConflict: the job is in a state the command does not apply to
	// (holding a running job, releasing one not held).
	ErrConflict = fault.ErrConflict
)

// conflictError is a refusal that errors.Is(ErrConflict) and reads as its
// message alone ("job 7 is RUNNING: only pending jobs can be held").
type conflictError struct{ msg string }

func (e *conflictError) Error() string        { return e.msg }
func (e *conflictError) Is(target error) bool { return target == ErrConflict }

func conflict(format string, args ...any) error {
	return &conflictError{msg: fmt.Sprintf(format, args...)}
}

// SchemaVersion is the version of the replicated state's schema: of
// Command as the raft log carries it and of Dump as snapshots do. Raise it
// when a change would make an older schedd misread an entry or a snapshot
// (a field whose absence means something else, a kind it would apply
// differently); an older schedd then refuses the entry or snapshot by
// name (ErrSchema) instead of skipping or misapplying it. Entries and
// snapshots written before versions existed carry none and read as 1.
//
//	1: the first versioned schema
//	2: job arrays (an older schedd would run an array's submit as one job
//	   and never make its elements)
//	3: reports committed together ("reports"): an older schedd would
//	   refuse the unknown kind and lose every report in the entry
//	4: batch submits ("submit-batch"): an older schedd would refuse the kind
//	   and lose the jobs
//	5: rows split from the API's views (Job, Node): a job's containers
//	   carry their CPU in millicores (cpu_milli, converted at admission),
//	   and a node row no longer carries the derived "allocated". Rows of
//	   versions 1 to 4 still load: their millicores are derived from the
//	   job file's cpu and "allocated" is ignored (dropped
//	   by the strict reader of snapshot files through LegacyNode).
//	6: single submits committed together ("submits"): an older schedd
//	   would refuse the kind and lose the jobs
//	7: a request id is its user's own: a submit's retry is known by the
//	   user and the id together, so another user's submit with the same
//	   id makes a job of its own (an older schedd would answer it with
//	   the first user's job), and a kill, hold, release or signal carries
//	   its sender (By), its answer kept under both. Entries of versions
//	   1 to 6 replay by the id alone, as they were first applied
//	   (requestScoped; they carry no By).
//	8: a report about a job the state does not hold, with an id above
//	   every id given, raises the id counter past it (reportedIDs): a
//	   node runs a job of a history the state lost (an empty data dir,
//	   a restore), and its id must not be handed out again. Entries of
//	   versions 1 to 7 replay without it.
//	9: every run in the state (nodeRuns): a requeue keeps the run it
//	   ends in the job's Runs (its nodes, start, end, exit and usage)
//	   and starts the next with no usage; a report's container start and
//	   end are the node's times (ContainerUpdate.At, kept within the run)
//	   and a run ends at its containers' latest end, not the entry's
//	   time; a container's routed address (Container.Reach) is kept.
//	   Entries of versions 1 to 8 replay as before: no run kept, the
//	   usage carried on into the next run, every start and end at the
//	   entry's time, and no routed address (containers reported running
//	   while a cluster was mixed are reached from the user's other nodes
//	   once their job runs again).
//	10: a job the state holds queued (PENDING or HELD) that a node runs
//	   (adoptRuns): a report of its container running under the job's
//	   own session (ContainerUpdate.Session), its container unplaced,
//	   places the container on that node, running, and the job runs
//	   once all its containers are; a report of such a container's end
//	   ends the job with that reason (or requeues it when it asked to
//	   be), never a second run. It ran after the backup a restore
//	   brought back. Entries of versions 1 to 9 replay without it: such
//	   reports are dropped, as the nodes' containers were stopped.
//	11: rows resolved (legacy.go): a job row holds one walltime, the one
//	   in force, and no job file: what it asks of its session beyond its
//	   containers (Spec) and what its text costs (InputBytes); a
//	   container its millicores, memory and GPU, no job file resources
//	   in cores. An older schedd would read such a container as holding
//	   no memory. And typed entries (command.go): one kind per act, its
//	   payload its own type ({"kind", "act"}), where entries of 1 to 10
//	   were one union of every kind's fields; one Submit for "submit",
//	   "submit-batch" and "submits", one Reports for "report" and
//	   "reports"; a kill, hold or release names its job (JobRef) and
//	   request (Request). Rows and entries of versions 1 to 10 still
//	   load, and while the cluster's schema is older they are written in
//	   its form (v10Command). And gang suspension and warning signals
//	   (SuspendSchema, suspend.go: the acts Suspend, Resume, Resumed and
//	   Warn; a job row's Suspended, SuspendedFor and Warned, its
//	   Spec.Signal): acts that have no form in older schemas, which the
//	   leader does not write while a peer reads an older one.
//	   And the adoption window a restore into an empty state opens
//	   (SchemaAdoptWindow, adopt.go): within it a report of a queued
//	   job's end is the job's true end, a gang waits for all its nodes,
//	   a job the state does not hold (submitted after the backup, an
//	   element of an array: adoptarray.go) is made from the node's copy
//	   of it, running or ended, no array gets new element rows, and
//	   AdoptEnd ends what is still adopting once the window closed and
//	   gives arrays their rows. Entries of version 10 replay as that
//	   release applied them: an end fails the queued job, a running
//	   container is placed, nothing is made from a node's copy (a leader
//	   whose peers read 10 ends what is still adopting with Kill).
//	   And reservations (reservation.go: CreateReservation,
//	   UpdateReservation, DeleteReservation, and Dump.Reservations): an
//	   older schedd would refuse the acts and schedule over the windows,
//	   so the leader refuses them while a peer reads an older schema
//	   (SchemaReservations).
//	   And a reservation's stop_jobs (StopReserved, resvstop.go): as
//	   its window opens the jobs running on its nodes are stopped as
//	   preemption victims are, for the reservation.
//	   And a plan's preemptions (Plan.Preemptions): the victims are
//	   stopped and, once stopped, requeued or ended PREEMPTED. Entries
//	   of versions 1 to 10 carry none.
//	   And node health checks (Health): a node's failing verdict drains
//	   it apart from an admin's drain (Node.Health) and requeues its
//	   requeue jobs, each excluded from the node (Job.ExcludeNodes),
//	   which placement honours. The act has no form before 11: the
//	   leader proposes none until the cluster's schema is 11.
const SchemaVersion = 11

// OldestSchema is the oldest schema version this schedd writes: the
// previous release's. A cluster in the middle of a rolling upgrade
// still has peers of that release, which refuse a newer entry and stop;
// so the leader writes the schema every peer reads (raftlog) and the
// state keeps the highest schema it has applied (Snapshot.Schema). A
// peer older than the previous release is outside the compatibility
// window: it may meet entries it refuses.
const OldestSchema = 6

// ErrSchema marks an entry or snapshot written by a newer schedd, whose
// schema this one does not know.
var ErrSchema = errors.New("unknown schema version")

// CheckSchema refuses a version this schedd cannot read (0 reads as 1).
func CheckSchema(v int) error {
	if v > SchemaVersion || v < 0 {
		return fmt.Errorf("%w %d: this schedd reads schema versions up to %d; run the newer schedd that wrote it (never mix versions that way round in one cluster)", ErrSchema, v, SchemaVersion)
	}
	return nil
}

// Plan is the scheduler core's answer, as the log carries it.
type Plan struct {
	Placements []Placement `json:"placements,omitempty"`
	Reasons    []Reason    `json:"reasons,omitempty"`
	// Preemptions are the running jobs to stop for pending ones
	// (schema 11 on).
	Preemptions []Preemption `json:"preemptions,omitempty"`
}

// Placement puts container i of a job on Nodes[i], with the GPU device
// shares GPUs[i] (GPUs nil: none named).
type Placement struct {
	JobID uint64       `json:"job_id"`
	Nodes []string     `json:"nodes"`
	GPUs  [][]GPUShare `json:"gpus,omitempty"`
}

// Reason sets a pending job's reason.
type Reason struct {
	JobID  uint64 `json:"job_id"`
	Reason string `json:"reason"`
}

// Report is a nodelet's container report.
type Report struct {
	Node    string            `json:"node"`
	Updates []ContainerUpdate `json:"updates"`
}

// reporters are the nodes whose reports c carries.
func (c *Command) reporters() []string {
	r, ok := c.Act.(Reports)
	if !ok {
		return nil
	}
	var out []string
	for _, rep := range r.Reports {
		if !slices.Contains(out, rep.Node) {
			out = append(out, rep.Node)
		}
	}
	return out
}

// Apply applies one committed command at raft index. It answers what
// each act says (Submit: the new jobs' ids, or each job's outcome; Reports: each report's jobs moved to RUNNING; Kill, Hold,
// Release and SignalJob: the job), nil for the others; or an error that
// leaves the state unchanged.
func (s *Store) Apply(index uint64, c Command) (any, error) {
	s.raiseSchema(c.Version)
	if c.Act == nil {
		return nil, ErrNoAct
	}
	req, reqJob, keep := requested(c.Act)
	if !requestScoped(c.Version) {
		// An older schema knows request ids without their sender: so do
		// its entries here, as every peer applies them.
		req.By = ""
	}
	keep = keep && req.ID != ""
	txn := s.db.Txn(true)
	defer txn.Abort()
	txn.TrackChanges() // settleArrays reads what the command changed
	if keep {
		first, ok, err := repeated(txn, c.Kind(), req, reqJob)
		if err != nil {
			return nil, err
		}
		if ok {
			return first, nil
		}
	}
	var (
		res any
		err error
	)
	switch a := c.Act.(type) {
	case Submit:
		scoped := requestScoped(c.Version)
		switch {
		case a.Each:
			res, err = submitEach(txn, index, c.Time, a.Jobs, scoped)
		case len(a.Jobs) == 1:
			var id uint64
			id, err = submit(txn, index, c.Time, a.Jobs[0], scoped)
			res = []uint64{id}
		default:
			res, err = submitBatch(txn, index, c.Time, a.Jobs, scoped)
		}
	case Register:
		err = register(txn, c.Time, a.Node)
	case Place:
		err = applyPlan(txn, index, a.Plan)
		if err == nil && a.Plan != nil && preemptRuns(c.Version) {
			err = preempt(txn, index, c.Time, a.Plan.Preemptions)
		}
	case Reports:
		res, err = reports(txn, index, c.Time, a.Reports, reportedIDs(c.Version), nodeRuns(c.Version), adoptRuns(c.Version), adoptWindow(c.Version))
	case Kill:
		res, err = onJob(txn, index, a.Job.ID, a.Job.Index, func(id uint64) (*Job, error) { return kill(txn, index, c.Time, id, a.Done) })
	case Hold:
		res, err = onJob(txn, index, a.Job.ID, a.Job.Index, func(id uint64) (*Job, error) { return hold(txn, index, id) })
	case Release:
		res, err = onJob(txn, index, a.Job.ID, a.Job.Index, func(id uint64) (*Job, error) { return release(txn, index, id) })
	case Configure:
		err = setConfig(txn, a.Config)
	case Charge:
		err = charge(txn, c.Time)
	case Timeout:
		err = timeout(txn, index, c.Time, a.Jobs)
	case NodesDown:
		err = nodeDown(txn, index, c.Time, a.Down, nodeRuns(c.Version))
	case NodeUp:
		err = nodeUp(txn, a.Node)
	case PutToken:
		err = putToken(txn, a.Token)
	case Revoke:
		err = revokeToken(txn, a.ID)
	case PutServer:
		err = putServer(txn, a.Server)
	case DrainNodes:
		err = drain(txn, c.Time, a.Drain)
	case SignalJob:
		res, err = signalJob(txn, index, c.Time, a.Signal)
	case Purge:
		err = purge(txn, a.Keys)
	case MailSent:
		res, err = mailed(txn, index, a.Mailed)
	case Suspend:
		res, err = suspendJob(txn, index, c.Time, a)
	case Resume:
		res, err = resumeWanted(txn, index, a.Job)
	case Resumed:
		err = resumed(txn, index, c.Time, a.Jobs)
	case Warn:
		err = warn(txn, index, c.Time, a)
	case CreateReservation:
		err = putReservation(txn, index, c.Time, a.Reservation, true)
	case UpdateReservation:
		err = putReservation(txn, index, c.Time, a.Reservation, false)
	case DeleteReservation:
		err = deleteReservation(txn, a.Name)
	case StopReserved:
		err = stopReserved(txn, index, c.Time, a)
	case Health:
		err = health(txn, index, c.Time, a)
	case AdoptEnd:
		if !adoptWindow(c.Version) {
			// Refused alike by every peer: a leader writes it only when
			// every peer reads the schema that has it (raftlog).
			err = fmt.Errorf("%s in an entry of schema %d: the adoption window's end is schema %d's", c.Kind(), c.Version, SchemaAdoptWindow)
			break
		}
		err = adoptEnd(txn, index, c.Time)
	case Touch:
	default:
		err = fmt.Errorf("raft entry: %w %q", ErrUnknownKind, c.Kind())
	}
	if err != nil {
		return nil, err
	}
	if err := settleArrays(txn, index, c.Time, holdRefill(txn, c)); err != nil {
		return nil, err
	}
	_, touch := c.Act.(Touch)
	if err := bumpNodes(txn, index, touch, c.reporters()); err != nil {
		return nil, err
	}
	if err := countQueued(txn); err != nil {
		return nil, err
	}
	if j, ok := res.(*Job); ok && j.Array != nil {
		if raw, _ := txn.First(tableJobs, "id", j.ID); raw != nil {
			res = clone(raw.(*Job)) // as settled
		}
	}
	if keep {
		if err := remember(txn, index, c.Time, c.Kind(), req, reqJob, res.(*Job)); err != nil {
			return nil, err
		}
	}
	for _, t := range touched(c.Kind()) {
		if err := txn.Insert(tableIndexes, &indexEntry{Table: t, Index: index}); err != nil {
			return nil, err
		}
	}
	s.commit(txn)
	return res, nil
}

func touched(kind string) []string {
	switch kind {
	case CmdRegister, CmdNodeUp, CmdDrain:
		return []string{tableNodes}
	case CmdNodeDown, CmdHealth:
		return []string{tableNodes, tableJobs}
	case CmdStopReserved:
		return []string{tableJobs}
	case CmdTouch:
		return []string{tableJobs, tableNodes, tableSettings, tableUsage, tableReservations}
	case CmdCreateReservation, CmdUpdateReservation, CmdDeleteReservation:
		return []string{tableReservations}
	case CmdConfig:
		return []string{tableSettings}
	case CmdCharge:
		return []string{tableUsage}
	case CmdToken, CmdRevoke:
		return []string{tableTokens}
	case CmdServer:
		return []string{tableServers}
	}
	return []string{tableJobs}
}

func getJob(txn *memdb.Txn, id uint64) (*Job, error) {
	raw, err := txn.First(tableJobs, "id", id)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("job %d: %w", id, ErrNotFound)
	}
	return clone(raw.(*Job)), nil
}

// clone copies what writers change: the job and its containers.
func clone(j *Job) *Job {
	c := *j
	c.Containers = append([]Container(nil), j.Containers...)
	return &c
}

// requestScoped reports whether an entry of schema version v knows a
// submit's retry by its user and request id together (version 7 on);
// older entries replay by the request id alone, as they were applied
// when written, so that their jobs keep their ids.
func requestScoped(v int) bool { return v >= 7 }

func submit(txn *memdb.Txn, index uint64, now time.Time, in *Job, scoped bool) (uint64, error) {
	j, id, err := newRow(txn, index, now, in, scoped)
	if err != nil || j == nil {
		return id, err
	}
	return j.ID, txn.Insert(tableJobs, j)
}

// newRow checks a submitted job and makes its row, or returns the id of
// the job an earlier try of the same request made (and a nil row): with
// scoped, an earlier try by the same user only. It writes nothing, so a
// refusal leaves the transaction as it was.
func newRow(txn *memdb.Txn, index uint64, now time.Time, in *Job, scoped bool) (*Job, uint64, error) {
	if in == nil {
		return nil, 0, errors.New("submit without a job")
	}
	last, err := lastJobID(txn)
	if err != nil {
		return nil, 0, err
	}
	if in.RequestID != "" {
		var (
			raw any
			err error
		)
		if scoped {
			raw, err = txn.First(tableJobs, "user_request", in.User, in.RequestID)
		} else if j, jerr := jobOfRequest(txn, in.RequestID); j != nil || jerr != nil {
			raw, err = j, jerr
		}
		if err != nil {
			return nil, 0, err
		}
		if raw != nil {
			return nil, raw.(*Job).ID, nil // a retried submission: the job it made
		}
	}
	j := clone(in)
	share(j)
	j.ID = last + 1
	if len(j.Containers) > MaxSessionSize {
		return nil, 0, fmt.Errorf("a session holds at most %d containers, not %d", MaxSessionSize, len(j.Containers))
	}
	j.State, j.Submitted, j.ModifyIndex = lifecycle.JobPending, now, index
	if in.State == lifecycle.JobHeld { // bsub -H
		j.State, j.Reason = lifecycle.JobHeld, reason.Waiting(true, j.DependsOn != nil, false)
	}
	j.Array, j.ArrayID, j.ArrayIndex, j.ArraySpan = nil, 0, 0, nil
	if j.Spec.Array != nil {
		if err := newArray(j); err != nil {
			return nil, 0, err
		}
	}
	if err := checkDependency(txn, j); err != nil {
		return nil, 0, err
	}
	sessionNetwork(j)
	return j, j.ID, nil
}

// Submitted is one job's outcome in a Submit of jobs each alone (Each):
// its id, or why
// it was refused (the others in the entry are stored all the same).
type Submitted struct {
	ID  uint64
	Err error
}

// submitEach submits jobs in order in one transaction, each on its own:
// a refused job leaves the others stored, with consecutive ids.
func submitEach(txn *memdb.Txn, index uint64, now time.Time, jobs []*Job, scoped bool) ([]Submitted, error) {
	if len(jobs) == 0 {
		return nil, errors.New("submits entry without jobs")
	}
	out := make([]Submitted, len(jobs))
	for i, in := range jobs {
		j, id, err := newRow(txn, index, now, in, scoped)
		if err != nil {
			out[i].Err = err
			continue
		}
		if j != nil {
			if err := txn.Insert(tableJobs, j); err != nil {
				return nil, err // the store failed, not the job: refuse the entry
			}
		}
		out[i].ID = id
	}
	return out, nil
}

// submitBatch submits jobs in order in one transaction: a failure of any
// leaves none. Each job with a request id that made a job already gets
// that job's id, as a retried single submit does.
func submitBatch(txn *memdb.Txn, index uint64, now time.Time, jobs []*Job, scoped bool) ([]uint64, error) {
	if len(jobs) == 0 {
		return nil, errors.New("batch submit without jobs")
	}
	ids := make([]uint64, len(jobs))
	for i, j := range jobs {
		id, err := submit(txn, index, now, j, scoped)
		if err != nil {
			return nil, fmt.Errorf("job %d of the batch: %w", i+1, err)
		}
		ids[i] = id
	}
	return ids, nil
}

func register(txn *memdb.Txn, now time.Time, in *Node) error {
	if in == nil || in.Name == "" {
		return errors.New("register without a node name")
	}
	n := *in
	n.State, n.LastHeartbeat = lifecycle.NodeUp, now
	if raw, _ := txn.First(tableNodes, "id", n.Name); raw != nil {
		n.Registered = raw.(*Node).Registered
		keepDrain(&n, raw.(*Node))
	} else {
		n.Registered = now
	}
	return txn.Insert(tableNodes, &n)
}

func applyPlan(txn *memdb.Txn, index uint64, p *Plan) error {
	if p == nil {
		return errors.New("empty plan")
	}
	for _, pl := range p.Placements {
		j, err := getJob(txn, pl.JobID)
		if err != nil {
			return err
		}
		if j.State != lifecycle.JobPending || len(pl.Nodes) != len(j.Containers) || adopting(j) {
			continue // changed since the scheduler's snapshot: skip, it will retry
		}
		for i := range j.Containers {
			c := &j.Containers[i]
			c.Node, c.State = pl.Nodes[i], lifecycle.ContainerAssigned
			if i < len(pl.GPUs) {
				c.GPUs = pl.GPUs[i]
			}
			if raw, _ := txn.First(tableNodes, "id", c.Node); raw != nil {
				c.NodeAddr = raw.(*Node).Addr
			}
		}
		j.State, j.Reason, j.ModifyIndex = lifecycle.JobScheduled, "", index
		if err := txn.Insert(tableJobs, j); err != nil {
			return err
		}
	}
	for _, r := range p.Reasons {
		j, err := getJob(txn, r.JobID)
		if err != nil {
			return err
		}
		if j.State != lifecycle.JobPending {
			continue
		}
		j.Reason, j.ModifyIndex = r.Reason, index
		if err := txn.Insert(tableJobs, j); err != nil {
			return err
		}
	}
	return nil
}

// Started is a job a report moved to RUNNING: what its queue wait was.
type Started struct {
	JobID     uint64
	Partition string
	Wait      time.Duration // Started − Submitted
}

// reportedIDs tells whether an entry of schema version v raises the id
// counter past the ids of jobs it reports that the state does not hold
// (version 8 on).
func reportedIDs(v int) bool { return v >= 8 }

// nodeRuns tells whether an entry of schema version v keeps every run:
// a requeue saves the run it ends (Job.Runs) and a report takes its
// containers' start and end times from the node (version 9 on). An older
// entry ends and starts at its own time and keeps no run, as the release
// that wrote it applies it.
func nodeRuns(v int) bool { return v >= 9 }

// adoptRuns tells whether an entry of schema version v adopts the
// containers of a queued job that a node reports running under the
// job's session (version 10 on; see adopt).
func adoptRuns(v int) bool { return v >= 10 }

// maxIDJump bounds how far one report of an unknown job may raise the id
// counter: a job run since the state was lost is well within it, and a
// node reporting a wild id cannot run the counter out.
const maxIDJump = 1 << 32

// report applies one node's report. With ids, an update about a job the
// state does not hold whose id is above every id given raises the id
// counter to it: the node runs a job of a history this state lost. With
// runs, containers start and end when their node says (nodeTime), else
// at now.
func report(txn *memdb.Txn, index uint64, now time.Time, r *Report, ids, runs, adopts, window bool) ([]Started, error) {
	if r == nil {
		return nil, errors.New("empty report")
	}
	var started []Started
	changed := map[uint64]*Job{}
	was := map[uint64]lifecycle.JobState{}
	wasStarted := map[uint64]bool{}
	adoptStart := map[uint64]time.Time{}
	for _, u := range r.Updates {
		j := changed[u.JobID]
		if j == nil {
			var err error
			if j, err = getJob(txn, u.JobID); err != nil {
				// A job schedd forgot: the nodelet stops it anyway.
				if ids {
					if err := raiseLastJobID(txn, u.JobID); err != nil {
						return nil, err
					}
				}
				if !window {
					continue
				}
				if j, err = newAdopted(txn, index, u, now); err != nil {
					return nil, err
				} else if j == nil {
					continue
				}
			}
			if _, ok := was[j.ID]; !ok {
				was[j.ID], wasStarted[j.ID] = j.State, !j.Started.IsZero()
			}
		}
		if adopts && adopt(txn, j, r.Node, u, now, adoptStart, window) {
			changed[j.ID] = j
			continue
		}
		if j.State.Terminal() || u.Requeues != j.Requeues {
			continue // ended, or about an earlier run of a requeued job
		}
		for i := range j.Containers {
			c := &j.Containers[i]
			if c.Host != u.Host || c.Node != r.Node || c.State.Ended() {
				continue
			}
			c.State, c.ExitCode, c.Message = u.State, u.ExitCode, u.Message
			if runs && u.State.Ended() {
				c.Ended = nodeTime(j, u.At, now)
			}
			if runs && u.Reach != "" {
				// Schema 9 as the runs: a peer of an older release drops
				// the field, so every peer keeps it from 9 on only.
				c.Reach = u.Reach
			}
			addUsage(j, c, u)
			changed[j.ID] = j
		}
		// Each update moves the job on, so that a report carrying a
		// container's running and exited at once still starts the job
		// (its Started, when the node says it started) before it ends it.
		if changed[j.ID] == j {
			start, end := now, now
			if runs && u.State == lifecycle.ContainerRunning {
				start = nodeTime(j, u.At, now)
			}
			if runs {
				end = lastEnd(j, now)
			}
			advance(j, start, end)
			settlePreempted(j, runs)
		}
	}
	for _, j := range changed {
		// Started in this report (perhaps ended in it too).
		if was[j.ID] != lifecycle.JobRunning && !wasStarted[j.ID] && !j.Started.IsZero() {
			started = append(started, Started{JobID: j.ID, Partition: j.Partition, Wait: j.Started.Sub(j.Submitted)})
		}
		j.ModifyIndex = index
		if err := txn.Insert(tableJobs, j); err != nil {
			return nil, err
		}
	}
	return started, nil
}

// reports applies rs in order in one transaction, as that many report
// entries would have, and answers each report's started jobs (index i
// for rs[i]). A report refuses nothing: an update about an ended job or
// an earlier run of a requeued one (stale) is dropped alone, and the
// rest of its report and the other reports still apply. Only a failure
// of the store itself fails the entry, and then none of it applies.
func reports(txn *memdb.Txn, index uint64, now time.Time, rs []Report, ids, runs, adopts, window bool) ([][]Started, error) {
	if len(rs) == 0 {
		return nil, errors.New("reports without a report")
	}
	out := make([][]Started, len(rs))
	for i := range rs {
		started, err := report(txn, index, now, &rs[i], ids, runs, adopts, window)
		if err != nil {
			return nil, err
		}
		out[i] = started
	}
	return out, nil
}

// advance derives the job's state from its containers' (docs/ARCHITECTURE.md,
// "The life of a job"): the session ends when main1 ends or a container fails; the
// job ends when every container has. A job that starts starts at start,
// one that ends ends at end.
func advance(j *Job, start, end time.Time) {
	all, running, active := true, true, false
	for _, c := range j.Containers {
		switch {
		case c.State == lifecycle.ContainerFailed || c.State == lifecycle.ContainerOOM:
			j.KillWanted = true
			if j.Reason == "" {
				j.Reason = c.Host + ": " + c.Message
			}
		}
		if c.Role == RoleMain && c.Idx == 1 && c.State.Ended() {
			j.KillWanted = true
			if c.State == lifecycle.ContainerExited || c.State == lifecycle.ContainerOOM {
				j.ExitCode = c.ExitCode
			}
		}
		if !c.State.Ended() {
			all = false
		}
		if c.State != lifecycle.ContainerRunning {
			running = false
		}
		if c.State == lifecycle.ContainerPreparing || c.State == lifecycle.ContainerRunning || c.State.Ended() {
			active = true
		}
	}
	switch {
	case all:
		j.State, j.Ended = finalState(j), end
	case running && !j.KillWanted:
		if j.State != lifecycle.JobRunning {
			j.State, j.Started = lifecycle.JobRunning, start
		}
	case active && j.State == lifecycle.JobScheduled:
		j.State = lifecycle.JobPreparing
	}
}

// nodeTime is when a container of j's current run started or ended
// that its node says did so at (on schedd's clock:
// api.ContainerReport.OnClock): kept within the run, between its start
// (or, before it started, its submission or requeue) and now, the
// entry's time, so that a node's clock gone wrong can neither end a run
// before it began nor start or end it after the report arrived. Without
// a time from the node (an older nodelet), now.
func nodeTime(j *Job, at, now time.Time) time.Time {
	if at.IsZero() || at.After(now) {
		return now
	}
	from := j.Started
	if from.IsZero() {
		from = j.Submitted
		if n := len(j.Runs); n > 0 && j.Runs[n-1].Ended.After(from) {
			from = j.Runs[n-1].Ended
		}
	}
	if at.Before(from) {
		return from
	}
	return at
}

// lastEnd is when j's current run ended, every container having ended:
// the latest end its nodes measured; now when none told.
func lastEnd(j *Job, now time.Time) time.Time {
	var end time.Time
	for _, c := range j.Containers {
		if c.Ended.After(end) {
			end = c.Ended
		}
	}
	if end.IsZero() {
		return now
	}
	return end
}

// finalStateOfQueued is how a job killed before it started ends.
func finalStateOfQueued(j *Job) lifecycle.JobState {
	if j.KillDone {
		return lifecycle.JobCompleted
	}
	return lifecycle.JobCancelled
}

func finalState(j *Job) lifecycle.JobState {
	main := j.Containers[0]
	switch {
	case j.Cancelled && j.KillDone:
		return lifecycle.JobCompleted
	case j.Cancelled:
		return lifecycle.JobCancelled
	case j.TimedOut:
		return lifecycle.JobTimeout
	case j.preempting() && j.Preempt.Mode == PreemptCancel && j.Preempt.Reservation != "":
		return lifecycle.JobCancelled // stopped for a reservation: not preempted by a job
	case j.preempting() && j.Preempt.Mode == PreemptCancel:
		return lifecycle.JobPreempted
	case main.State == lifecycle.ContainerExited && main.ExitCode == 0 && j.Reason == "":
		return lifecycle.JobCompleted
	default:
		if j.ExitCode == 0 {
			j.ExitCode = 1
		}
		return lifecycle.JobFailed
	}
}

func kill(txn *memdb.Txn, index uint64, now time.Time, id uint64, done bool) (*Job, error) {
	j, err := getJob(txn, id)
	if err != nil {
		return nil, err
	}
	if j.State.Terminal() {
		return nil, fmt.Errorf("job %d: %w (%s)", id, ErrEnded, j.State)
	}
	if j.Array != nil {
		return killArray(txn, index, now, j, done)
	}
	j.Cancelled, j.ModifyIndex = true, index
	j.KillDone = j.KillDone || done
	if j.State == lifecycle.JobPending || j.State == lifecycle.JobHeld {
		j.State, j.Ended, j.Reason = finalStateOfQueued(j), now, ""
	} else {
		j.KillWanted = true
	}
	return j, txn.Insert(tableJobs, j)
}

// hold keeps a pending job from being scheduled until it is released.
func hold(txn *memdb.Txn, index uint64, id uint64) (*Job, error) {
	j, err := getJob(txn, id)
	if err != nil {
		return nil, err
	}
	if j.Array != nil && !j.State.Terminal() {
		return holdArray(txn, index, j, true)
	}
	switch {
	case j.State == lifecycle.JobHeld:
		return nil, conflict("job %d is already held", id)
	case j.State.Terminal():
		return nil, fmt.Errorf("job %d: %w (%s)", id, ErrEnded, j.State)
	case j.State != lifecycle.JobPending:
		return nil, conflict("job %d is %s: only pending jobs can be held", id, j.State)
	}
	j.State, j.Reason, j.ModifyIndex = lifecycle.JobHeld, reason.Waiting(true, j.DependsOn != nil, false), index
	return j, txn.Insert(tableJobs, j)
}

// release puts a held job back in the queue; the next scheduling pass
// gives it its real reason.
func release(txn *memdb.Txn, index uint64, id uint64) (*Job, error) {
	j, err := getJob(txn, id)
	if err != nil {
		return nil, err
	}
	if j.Array != nil && !j.State.Terminal() {
		return holdArray(txn, index, j, false)
	}
	switch {
	case j.State.Terminal():
		return nil, fmt.Errorf("job %d: %w (%s)", id, ErrEnded, j.State)
	case j.State != lifecycle.JobHeld:
		return nil, conflict("job %d is %s: only held jobs can be released", id, j.State)
	}
	j.State, j.Reason, j.ModifyIndex = lifecycle.JobPending, reason.Waiting(false, j.DependsOn != nil, false), index
	return j, txn.Insert(tableJobs, j)
}

// timeout ends the jobs in ids that still run: their nodelets stop them
// and they end TIMEOUT. The leader decides who is late (Started +
// Walltime <= its clock) and logs the list, so replicas agree.
func timeout(txn *memdb.Txn, index uint64, now time.Time, ids []uint64) error {
	for _, id := range ids {
		j, err := getJob(txn, id)
		if err != nil {
			continue
		}
		if j.State.Terminal() || j.Started.IsZero() || j.KillWanted || j.Array != nil || j.Suspended != nil {
			continue // a suspended job's walltime does not run
		}
		j.TimedOut, j.KillWanted, j.ModifyIndex = true, true, index
		j.Reason = fmt.Sprintf("walltime %s exceeded", j.Walltime)
		if err := txn.Insert(tableJobs, j); err != nil {
			return err
		}
	}
	return nil
}

// onJob runs do on job id, or with idx on element *idx of array id
// (making its row if it has none yet).
func onJob(txn *memdb.Txn, index, id uint64, idx *int, do func(uint64) (*Job, error)) (*Job, error) {
	if idx == nil {
		return do(id)
	}
	p, err := getJob(txn, id)
	if err != nil {
		return nil, err
	}
	if p.Array == nil {
		return nil, fmt.Errorf("job %d[%d]: job %d is not an array: %w", id, *idx, id, ErrNotFound)
	}
	e, err := elementForCommand(txn, index, p, *idx)
	if err != nil {
		return nil, err
	}
	return do(e.ID)
}

// Late lists the running jobs whose walltime has passed at now, and the
// earliest time another one will (zero when none runs with a walltime).
// Time suspended does not count (Job.Deadline); a suspended job is never
// late.
func (v *Snapshot) Late(now time.Time) (late []uint64, next time.Time) {
	// Only a started job can be late: the state index leaves out the
	// queue and the ended jobs waiting for their purge, which a pass
	// (it runs on every state change) would otherwise walk each time.
	for _, j := range v.JobsIn(lifecycle.JobScheduled, lifecycle.JobPreparing, lifecycle.JobRunning) {
		end := j.Deadline()
		if j.State.Terminal() || end.IsZero() || j.KillWanted || j.Array != nil {
			continue
		}
		switch {
		case !end.After(now):
			late = append(late, j.ID)
		case next.IsZero() || end.Before(next):
			next = end
		}
	}
	return late, next
}
