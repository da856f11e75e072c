package nodelet

import (
	"context"
	"encoding/json"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/session"
)

// reconcile makes the containers of this node match as:
//
//	running here, KillWanted                  → stop (task reports killed)
//	running here, job gone                    → report it running (under
//	                                            its session) first; stop
//	                                            once an answer asked
//	                                            after schedd took that
//	                                            still lacks it (a state
//	                                            restored to before it
//	                                            started adopts it)
//	running here, job gone, schedd's state    → keep running (a restore may
//	has no job yet (NoJobsYet)                  bring the job back)
//	running here, the job under its id is     → stop, then start the other
//	another (another session)
//	not here, KillWanted, state not ended     → report killed (never started)
//	not here, state assigned (or pending)     → start a task
//	not here, state preparing/running, no     → report failed: lost (a
//	record of its end                           previous nodelet ran it)
//	ended here already, or state ended        → nothing
//	ended here, state placed or running       → send its final update
//	                                            again (schedd's state went
//	                                            back: a snapshot restored)
//	not here, its end kept here (outcomeLog), → send that final update
//	state assigned/preparing/running            again: never a second run,
//	                                            never "lost"
//	not here, no lease from schedd in force   → wait (start once granted)
//	an earlier run (before a requeue) still   → wait until it has stopped
//	stopping here
//
// A container is keyed by job, host and run (the job's Requeues), and
// reports name the run, so schedd drops those about an earlier one.
func (a *reconciler) reconcile(ctx context.Context, as api.Assignments) {
	a.mu.Lock()
	a.last, a.assigned = as, true
	a.lastQuery = a.queries
	a.reconcileLocked(ctx)
	a.mu.Unlock()
	a.setPeers(as)
}

// setPeers hands the network the addresses schedd names of the node's
// users' containers elsewhere (Assignment.Peers), by uid. Outside a.mu:
// taking an address out of the node's rules costs the kernel an RCU
// grace period.
func (a *reconciler) setPeers(as api.Assignments) {
	if a.net == nil {
		return
	}
	if err := a.net.SetPeers(userPeers(as)); err != nil {
		a.log.Warn("default network: the rules for the users' containers on other nodes were not written; they keep the previous ones", "err", err)
	}
}

// userPeers gathers the assignments' Peers by uid. schedd sends a
// user's whole list with each of their jobs, so the same list comes once
// an assignment: it is taken once, not appended again (the network
// would parse and sort every copy on each answer, jobs × peers, as a
// user's burst of sessions starts); a different list is appended
// (SetPeers drops what repeats).
func userPeers(as api.Assignments) map[int][]string {
	peers := map[int][]string{}
	for _, asg := range as.Assignments {
		uid := asg.Job.UID
		have, ok := peers[uid]
		switch {
		case !ok:
			peers[uid] = asg.Peers
		case slices.Equal(have, asg.Peers):
		default:
			peers[uid] = append(slices.Clip(have), asg.Peers...)
		}
	}
	return peers
}

// reconcileLocked reconciles the last assignments; a.mu is held. A task
// that ends calls it too: a later run of its container may be waiting.
// Once ctx ends it does nothing: the nodelet is stopping, its tasks stop
// (or, detaching, leave their containers running) by themselves, and an
// answer to the assignments query or the heartbeat that comes in after
// must not find a container left running "not here" and report it lost.
// Before schedd's first answer it does nothing either (reconciler.assigned).
func (a *reconciler) reconcileLocked(ctx context.Context) {
	if ctx.Err() != nil || !a.assigned {
		return
	}
	if a.told == nil {
		a.told, a.acked = map[key]uint64{}, map[key]bool{}
	}
	want := map[key]api.AssignedJob{}
	for _, asg := range a.last.Assignments {
		for _, h := range asg.Hosts {
			want[key{asg.Job.ID, h, asg.Job.Requeues}] = asg.Job
		}
	}
	if a.last.NoJobsYet && !a.keptUnassigned && len(a.running) > 0 {
		a.log.Warn("schedd's state holds no job yet (a new or emptied data dir): keeping the containers running here until it does", "containers", len(a.running))
	}
	a.keptUnassigned = a.last.NoJobsYet
	for k, t := range a.running {
		job, ok := want[k]
		switch {
		case !ok && a.last.NoJobsYet:
			// Not schedd's to stop: its state lost the job's history;
			// a restore may bring it back.
		case !ok:
			a.unassigned(k, t)
		case job.KillWanted:
			t.queueSignals(job) // a preempted job's warning, delivered before the TERM
			t.requestStop()
		case job.SessionID != t.job.SessionID && t.job.SessionID != "":
			// Another job under the same id (a state that handed the
			// id out again): not this container's; the new one starts
			// once it has stopped.
			t.requestStop()
		default:
			t.queueSignals(job)
			t.wantFrozen(job.Suspended != nil)
		}
	}
	if w := a.last.AdoptUntil; !w.IsZero() && !w.Equal(a.toldAdopt) {
		a.toldAdopt = w
		a.tellKept(want)
	}
	for k := range a.announced {
		if _, ok := want[k]; ok || a.running[k] == nil {
			delete(a.announced, k)
		}
	}
	for k := range a.finished {
		if _, ok := want[k]; !ok {
			delete(a.finished, k)
			delete(a.told, k)
			delete(a.acked, k)
		}
	}
	for k, job := range want {
		if a.running[k] == nil && !a.finished[k] && !a.earlierRunHere(k) {
			a.admit(ctx, k, job)
		} else if a.running[k] == nil && a.finished[k] {
			if c, err := session.Container(job, k.host); err == nil && c.State.Ended() {
				a.acked[k] = true
			} else if a.acked[k] {
				a.tellEnd(k, job)
			}
		}
	}
}

// announcement is a container running here that schedd stopped
// assigning, reported running again (reconciler.unassigned).
type announcement struct {
	index uint64 // the answer's index it was sent at
	// update is what was sent; delivered, once schedd took it, the
	// number of assignments queries issued by then (reconciler.queries).
	update    api.ContainerUpdate
	delivered uint64
	taken     bool
}

// unassigned decides about t, k's container, running here while
// schedd's state holds jobs but assigns it not. Normally the job ended
// or moved, and the container stops. But a state restored from a backup
// may show the job queued, from before it started here: stopping it
// and letting schedd start it again would run it twice. So the nodelet
// reports it running first, under its job's session; schedd adopts it
// when the job it holds under that id is the same one and queued
// (schema 10), and assigns it here again. It is stopped once an answer
// to a query asked after schedd took the report still does not assign
// it; the task then reports it killed, and schedd ends the job with
// that reason. Once for each of schedd's indexes that went back (a
// restore again). a.mu is held.
func (a *reconciler) unassigned(k key, t *task) {
	if t.ended.Load() || t.job.SessionID == "" {
		t.requestStop()
		return
	}
	if a.announced == nil {
		a.announced = map[key]*announcement{}
	}
	an := a.announced[k]
	if an == nil || a.last.Index < an.index {
		an = &announcement{index: a.last.Index, update: api.ContainerUpdate{JobID: k.job, Host: k.host, Requeues: k.run,
			State: api.ContainerRunning, At: t.startedAt, Session: t.job.SessionID}}
		if !a.last.AdoptUntil.IsZero() {
			// The adoption window after a restore: the job may be one
			// submitted after the backup, which schedd adopts from the
			// node's copy.
			job := t.job
			an.update.Job = &job
		}
		a.announced[k] = an
		a.log.Info("schedd no longer assigns a container running here: reporting it running before stopping it, so a state restored to before it started can adopt it", "job", k.job, "host", k.host)
		a.rep.Add(an.update)
		return
	}
	if !an.taken {
		for _, u := range a.rep.Queued() {
			if u == an.update {
				return // not yet taken
			}
		}
		an.taken, an.delivered = true, a.queries
		return
	}
	if a.lastQuery > an.delivered {
		a.log.Info("stopping a container schedd does not assign after it was reported running", "job", k.job, "host", k.host)
		t.requestStop()
	}
}

// tellEnd sends again the final update of k's container, which ended
// here, when schedd shows it placed or running after it had shown it
// ended (acked) or stopped assigning it: schedd's state went back (a
// snapshot restored) to before the end. a.mu is held.
func (a *reconciler) tellEnd(k key, job api.AssignedJob) {
	c, err := session.Container(job, k.host)
	if err != nil || c.State.Ended() || c.State == api.ContainerPending {
		return
	}
	if u, ok := a.reports.outcomes.get(k, job); ok && a.told[k] != a.last.Index {
		// Once for each answer of schedd's: until schedd has applied
		// the first telling, the next answers still show it running.
		a.told[k] = a.last.Index
		a.log.Info("schedd shows a container that ended here as not ended: telling its end again", "job", k.job, "host", k.host, "state", u.State)
		a.rep.Add(u)
	}
}

// tellKept sends again, once per adoption window after a restore
// (api.Assignments.AdoptUntil), the final update of every container
// that ended here and that the answer does not assign (want): the
// restored state may show its job queued, from before it ran, and takes
// the end as the job's true outcome instead of running it again. Ends of
// jobs the state holds otherwise (ended, or another run) are dropped
// there. a.mu is held.
func (a *reconciler) tellKept(want map[key]api.AssignedJob) {
	n := 0
	for k, u := range a.reports.outcomes.all() {
		if _, ok := want[k]; ok || a.running[k] != nil {
			continue // assigned: tellEnd tells it; or running again here
		}
		a.rep.Add(u)
		n++
	}
	if n > 0 {
		a.log.Info("schedd adopts what the nodes ran after a restore: telling the ends kept here", "containers", n)
	}
}

// assignedJob is the job the last answer assigns k's container of, if
// any. a.mu is held.
func (a *reconciler) assignedJob(k key) (api.AssignedJob, bool) {
	for _, asg := range a.last.Assignments {
		if asg.Job.ID != k.job || asg.Job.Requeues != k.run {
			continue
		}
		for _, h := range asg.Hosts {
			if h == k.host {
				return asg.Job, true
			}
		}
	}
	return api.AssignedJob{}, false
}

// earlierRunHere reports whether an earlier run of k's container (before
// a requeue) is still stopping here: the new run waits for it, so the
// two never run at once. a.mu is held.
func (a *reconciler) earlierRunHere(k key) bool {
	for r := range a.running {
		if r.job == k.job && r.host == k.host && r.run != k.run {
			return true
		}
	}
	return false
}

// admit decides about one container not running here. a.mu is held.
func (a *reconciler) admit(ctx context.Context, k key, job api.AssignedJob) {
	c, err := session.Container(job, k.host)
	if err != nil {
		a.log.Error("assignment names a host the job lacks", "job", k.job, "host", k.host)
		return
	}
	switch {
	case c.State.Ended():
		return
	case a.reports.outcomes.has(k, job):
		// It ran and ended here, and left the assignments; schedd's
		// state has gone back to before its end (a snapshot restored):
		// its true end, never a second run nor "lost".
		a.finished[k] = true
		a.tellEnd(k, job)
	case job.KillWanted:
		a.reports.endHere(k, &job, api.ContainerKilled, 0, "killed before it started")
	case c.State == api.ContainerAssigned || c.State == api.ContainerPending || c.State == "":
		if a.fence != nil && !a.fence.valid() {
			return // the fence would kill it: start once schedd grants a lease
		}
		a.launch.startTask(ctx, k, job)
	default:
		a.reports.endHere(k, &job, api.ContainerFailed, 0, "container lost: the node does not run it and has no record of its end (the nodelet restarted, or schedd's state went back) while it was "+string(c.State))
	}
}

// send queues u, an update of a container of job, for schedd and, when
// it is the container's final update, keeps it with job's copy
// (outcomeLog).
func (a *reporter) send(job *api.AssignedJob, u api.ContainerUpdate) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sendLocked(job, u)
}

// sendLocked is send with a.mu held. An update of a container whose job
// id schedd now gives another job (another session) is not sent: schedd
// would read it as the other job's.
func (a *reporter) sendLocked(job *api.AssignedJob, u api.ContainerUpdate) {
	session := job.SessionID
	if w, ok := a.recon.assignedJob(key{u.JobID, u.Host, u.Requeues}); ok && session != "" && w.SessionID != "" && w.SessionID != session {
		a.log.Warn("not reporting a container of a job schedd no longer holds: its id now names another job", "job", u.JobID, "host", u.Host, "state", u.State)
		return
	}
	if u.Session == "" {
		u.Session = session
	}
	if u.State.Ended() {
		a.outcomes.put(key{u.JobID, u.Host, u.Requeues}, job, u)
	}
	a.rep.Add(u)
}

// maxOutcomes bounds outcomeLog: the final updates of the last this many
// containers that ended here.
const maxOutcomes = 8192

// maxOutcomeJob bounds the copy of its job an end is kept with (the
// assignment as this node had it, JSON): a larger one (a long job file)
// is not kept, and its end alone is. A report of report.MaxBatch ends
// each with its copy then stays well within what schedd takes in one
// request. maxOutcomeJobs bounds all the copies together: past it the
// oldest ends lose theirs first. Ends of one job's containers share one
// copy.
const (
	maxOutcomeJob  = 8 << 10
	maxOutcomeJobs = 32 << 20
)

// outcomeLog is a bounded memory of final updates, oldest dropped first.
// Each end is kept with its job's session id: it is told only for the
// same job, never for another one under the same id. And with the
// node's copy of its job (api.AssignedJob, bounded in size): in the
// adoption window after a restore into an empty state, schedd makes the
// row of a job submitted after the backup that has ended from it.
type outcomeLog struct {
	mu    sync.Mutex
	byKey map[key]outcome
	order []key
	// copies are the kept jobs' copies by job id and session, with the
	// number of kept ends that share each; bytes is their sum.
	copies map[copyKey]*jobCopy
	bytes  int
}

type outcome struct {
	session string
	update  api.ContainerUpdate
	copy    *jobCopy // nil: too large, or dropped for room
}

type copyKey struct {
	job     uint64
	session string
}

type jobCopy struct {
	key  copyKey
	raw  []byte // the job's copy, JSON
	refs int
}

func (o *outcomeLog) put(k key, job *api.AssignedJob, u api.ContainerUpdate) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byKey == nil {
		o.byKey, o.copies = map[key]outcome{}, map[copyKey]*jobCopy{}
	}
	if old, ok := o.byKey[k]; ok {
		o.release(old)
	} else {
		o.order = append(o.order, k)
	}
	o.byKey[k] = outcome{job.SessionID, u, o.hold(job)}
	for len(o.order) > maxOutcomes {
		o.release(o.byKey[o.order[0]])
		delete(o.byKey, o.order[0])
		o.order = o.order[1:]
	}
	for i := 0; o.bytes > maxOutcomeJobs && i < len(o.order); i++ {
		if e := o.byKey[o.order[i]]; e.copy != nil {
			o.release(e)
			e.copy = nil
			o.byKey[o.order[i]] = e
		}
	}
}

// hold is job's copy, shared with the other kept ends of its containers;
// nil when it is larger than maxOutcomeJob. o.mu is held.
func (o *outcomeLog) hold(job *api.AssignedJob) *jobCopy {
	ck := copyKey{job.ID, job.SessionID}
	if c := o.copies[ck]; c != nil {
		c.refs++
		return c
	}
	raw, err := json.Marshal(job)
	if err != nil || len(raw) > maxOutcomeJob {
		return nil
	}
	c := &jobCopy{key: ck, raw: raw, refs: 1}
	o.copies[ck], o.bytes = c, o.bytes+len(raw)
	return c
}

// release lets go of e's share of its job's copy. o.mu is held.
func (o *outcomeLog) release(e outcome) {
	if e.copy == nil {
		return
	}
	if e.copy.refs--; e.copy.refs == 0 {
		delete(o.copies, e.copy.key)
		o.bytes -= len(e.copy.raw)
	}
}

// all is every end kept, oldest first, each with its job's copy
// (api.ContainerUpdate.Job) when one is kept.
func (o *outcomeLog) all() iter.Seq2[key, api.ContainerUpdate] {
	o.mu.Lock()
	out := make([]outcome, 0, len(o.order))
	keys := slices.Clone(o.order)
	for _, k := range keys {
		out = append(out, o.byKey[k])
	}
	o.mu.Unlock()
	return func(yield func(key, api.ContainerUpdate) bool) {
		for i, k := range keys {
			u := out[i].update
			if c := out[i].copy; c != nil {
				var job api.AssignedJob
				if json.Unmarshal(c.raw, &job) == nil {
					u.Job = &job
				}
			}
			if !yield(k, u) {
				return
			}
		}
	}
}

func (o *outcomeLog) has(k key, job api.AssignedJob) bool {
	_, ok := o.get(k, job)
	return ok
}

// get is k's end when it was job's (the same session).
func (o *outcomeLog) get(k key, job api.AssignedJob) (api.ContainerUpdate, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.byKey[k]
	if !ok || e.session != job.SessionID {
		return api.ContainerUpdate{}, false
	}
	return e.update, true
}

// endedHere tells whether this nodelet has reported k's final state: its
// task reported the exit (or the failure to start), or it ended without
// a task. a.mu is held.
func (a *reporter) endedHere(k key) bool {
	if a.finished[k] {
		return true
	}
	t := a.running[k]
	return t != nil && t.ended.Load()
}

// endHere reports a final state for a container that has no task. a.mu
// is held.
func (a *reporter) endHere(k key, job *api.AssignedJob, state api.ContainerState, code int, msg string) {
	a.finished[k] = true
	a.sendLocked(job, api.ContainerUpdate{JobID: k.job, Host: k.host, Requeues: k.run, State: state, ExitCode: code, Message: msg, At: time.Now()})
}
