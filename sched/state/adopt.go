package state

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// After a restore into a state that held no job (schedd started on an
// empty data dir), the nodes still run, or ran, jobs the restored state
// shows queued or does not hold at all. For a while (the adoption
// window) the state takes what the nodes report of them as the truth:
//
//   - adoptUntilEntry: the window's end (Unix nanoseconds, on the clock
//     of the leader that restored). Every replica holds it, as it comes
//     with the restored state: a leader elected during the window holds
//     placements until it ends as the one that restored did.
//   - adoptAboveEntry: the highest job id the restored state accounts
//     for; a job a node runs under a higher id was submitted after the
//     backup, and its node's copy of the assignment becomes its row.
const (
	adoptUntilEntry = "adopt-until"
	adoptAboveEntry = "adopt-above"
)

// SchemaAdoptWindow is the schema version that has the adoption window:
// a report's end taken as a queued job's true outcome within it, rows
// made from the nodes' copies of jobs the state does not hold (ended or
// running, elements of arrays too: adoptarray.go), no new element rows
// while it is open, and AdoptEnd. A peer of the release that wrote
// schema 10 applies reports as that release did (adoptRuns alone), so
// the leader writes these only once every peer reads this version;
// until then the window still holds placements (a leader's own choice),
// and a job still adopting once it has closed is ended with Kill.
const SchemaAdoptWindow = 11

// adoptWindow tells whether an entry of schema version v applies the
// adoption window (SchemaAdoptWindow on).
func adoptWindow(v int) bool { return v >= SchemaAdoptWindow }

// NeedsSchema is the oldest schema version that can carry c (0: any the
// leader writes): the raft log refuses to write it in an older one.
func (c *Command) NeedsSchema() int {
	switch a := c.Act.(type) {
	case AdoptEnd:
		return SchemaAdoptWindow
	case Health:
		return commandSchema
	case Submit:
		if a.asksLicenses() {
			return LicenseSchema
		}
	}
	if reservationAct(c.Act) {
		return SchemaReservations
	}
	switch c.Act.(type) {
	case Suspend, Resume, Resumed, Warn:
		return SuspendSchema
	}
	return 0
}

// SetAdoption opens the adoption window of d, a dump about to be put in
// force into a state that held no job: until is its end, above the
// highest job id d accounts for (see the constants above). d's index
// entries are replaced, never modified in place.
func SetAdoption(d *Dump, until time.Time, above uint64) {
	set := map[string]uint64{adoptUntilEntry: uint64(until.UnixNano()), adoptAboveEntry: above}
	out := make([]*indexEntry, 0, len(d.Indexes)+2)
	for _, e := range d.Indexes {
		if _, ok := set[e.Table]; !ok {
			out = append(out, e)
		}
	}
	for _, t := range []string{adoptUntilEntry, adoptAboveEntry} {
		out = append(out, &indexEntry{Table: t, Index: set[t]})
	}
	d.Indexes = out
}

// adoption is the adoption window of the state in txn: its end (zero:
// none) and the highest job id the restored state accounted for.
func adoption(txn *memdb.Txn) (until time.Time, above uint64) {
	for _, t := range []string{adoptUntilEntry, adoptAboveEntry} {
		raw, err := txn.First(tableIndexes, "id", t)
		if err != nil {
			panic(err)
		}
		if raw == nil {
			return time.Time{}, 0
		}
		if t == adoptUntilEntry {
			until = time.Unix(0, int64(raw.(*indexEntry).Index))
		} else {
			above = raw.(*indexEntry).Index
		}
	}
	return until, above
}

// HoldsNoJob tells whether the state holds no job row: a new or emptied
// data dir, before a backup is restored into it. It cannot tell which of
// the nodes' containers should stop, so the nodes keep them all
// (api.Assignments.NoJobsYet), and a restore into it opens the adoption
// window (SetAdoption). The id counter plays no part: a node's report of
// a job the state does not hold moves it (reportedIDs) without making
// the state hold a job, and the nodes must go on keeping their
// containers for the restore to adopt them.
func (v *Snapshot) HoldsNoJob() bool {
	raw, err := v.txn.First(tableJobs, "id")
	if err != nil {
		panic(err)
	}
	return raw == nil
}

// AdoptUntil is the end of the adoption window a restore into an empty
// state opened (zero: none): until then no job is placed, so that the
// nodes announce what they run first, and what they report of the jobs
// the state shows queued is taken whole (adopt).
func (v *Snapshot) AdoptUntil() time.Time {
	until, _ := adoption(v.txn)
	return until
}

// adopt applies u, node's update, to j when j is queued (PENDING or
// HELD) and u is about j's own session and current run: the job ran on
// node after the backup this state was restored from (the backup shows
// it queued), and the node still runs it or ran it. It reports whether
// it took u (j changed); false leaves u to the ordinary report path,
// which drops it.
//
//   - Running, the container unplaced (or already adopted by node): the
//     container is placed on node, running.
//   - Ended, within the adoption window: the container is placed on
//     node, ended as it did there (the node's exit code, usage and
//     times): a job that started and ended since the backup ends with
//     its true outcome.
//
// Once every container of the job is placed, the job runs (RUNNING from
// the earliest start this report gave for its containers) or, when all
// have ended, ends as an ordinary job does. A gang spread over several
// nodes waits for each of them, queued and never placed again.
//
//   - Ended outside the window (the node stopped a container the state
//     did not assign, or the window closed before its gang was whole):
//     the job ran there and must not run twice: it ends FAILED with a
//     reason that says so, or, asked to be requeued (requeue = true),
//     is queued again as its next run.
//
// win tells whether the entry applies the adoption window
// (adoptWindow): without it a report's end is never taken as the job's
// true outcome, as schema 10 applied it.
func adopt(txn *memdb.Txn, j *Job, node string, u ContainerUpdate, now time.Time, start map[uint64]time.Time, win bool) bool {
	if (j.State != lifecycle.JobPending && j.State != lifecycle.JobHeld) || u.Session == "" || u.Session != j.SessionID || u.Requeues != j.Requeues {
		return false
	}
	i := -1
	for k := range j.Containers {
		if j.Containers[k].Host == u.Host {
			i = k
		}
	}
	if i < 0 {
		return false
	}
	c := &j.Containers[i]
	if (c.Node != "" && c.Node != node) || c.State.Ended() {
		return false
	}
	until, _ := adoption(txn)
	window := win && now.Before(until)
	switch {
	case u.State == lifecycle.ContainerRunning:
		c.Node, c.State, c.ExitCode, c.Message = node, lifecycle.ContainerRunning, 0, ""
		if raw, _ := txn.First(tableNodes, "id", node); raw != nil {
			c.NodeAddr = raw.(*Node).Addr
		}
		if u.Reach != "" {
			c.Reach = u.Reach
		}
		noteStart(j, u.At, now, start)
		settleAdopted(j, now, start)
		return true
	case u.State.Ended() && window:
		c.Node, c.State, c.ExitCode, c.Message = node, u.State, u.ExitCode, u.Message
		if raw, _ := txn.First(tableNodes, "id", node); raw != nil {
			c.NodeAddr = raw.(*Node).Addr
		}
		c.Ended = nodeTime(j, u.At, now)
		addUsage(j, c, u)
		began := u.Started
		if began.IsZero() {
			began = u.At
		}
		noteStart(j, began, now, start)
		settleAdopted(j, now, start)
		return true
	case u.State.Ended():
		why := fmt.Sprintf("it ran on node %s after the backup this state was restored from", node)
		if u.State == lifecycle.ContainerKilled {
			why += "; stopped at the restore, not run twice"
		} else {
			why += fmt.Sprintf("; it ended there (%s, exit %d), not run again", u.State, u.ExitCode)
		}
		c.Node, c.State, c.ExitCode, c.Message = node, u.State, u.ExitCode, u.Message
		c.Ended = nodeTime(j, u.At, now)
		addUsage(j, c, u)
		failAdopted(j, now, why)
		return true
	}
	return false
}

// noteStart keeps in start the earliest start, on the node, of j's
// containers this report adopted.
func noteStart(j *Job, at, now time.Time, start map[uint64]time.Time) {
	at = nodeTime(j, at, now)
	if s, ok := start[j.ID]; !ok || at.Before(s) {
		start[j.ID] = at
	}
}

// settleAdopted moves adopting j on once every container is placed: it
// runs, or, when every container has ended, ends as any job does
// (advance).
func settleAdopted(j *Job, now time.Time, start map[uint64]time.Time) {
	for _, o := range j.Containers {
		if o.Node == "" {
			return // more to adopt
		}
	}
	j.State, j.Reason, j.Started = lifecycle.JobRunning, "", start[j.ID]
	advance(j, j.Started, lastEnd(j, now))
}

// failAdopted ends adopting j, which ran after the backup and cannot be
// taken whole, for why: FAILED, its containers still unended stopped,
// or, asked to be requeued, queued again as its next run.
func failAdopted(j *Job, now time.Time, why string) {
	if j.Spec.Requeue {
		requeueJob(j, now, nil, why, true)
		return
	}
	exit := 0
	for k := range j.Containers {
		o := &j.Containers[k]
		if !o.State.Ended() {
			o.State, o.Message = lifecycle.ContainerKilled, "stopped: "+why
		} else if exit == 0 {
			exit = o.ExitCode
		}
	}
	j.State, j.Reason, j.KillWanted, j.Ended = lifecycle.JobFailed, why, true, lastEnd(j, now)
	if j.ExitCode = exit; j.ExitCode == 0 {
		j.ExitCode = 1
	}
}

// adoptEnd closes the adoption window at now: a job still adopting (a
// gang some of whose nodes reported its containers, the others not by
// the end of the window) cannot be taken whole and is ended
// (failAdopted); its adopted containers are stopped.
//
// Arrays get the element rows the window held back (touchArrays).
func adoptEnd(txn *memdb.Txn, index uint64, now time.Time) error {
	until, _ := adoption(txn)
	if until.IsZero() || now.Before(until) {
		return nil
	}
	if err := touchArrays(txn, index); err != nil {
		return err
	}
	it, err := txn.Get(tableJobs, "state", string(lifecycle.JobPending))
	if err != nil {
		return err
	}
	var ends []*Job
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if adopting(raw.(*Job)) {
			ends = append(ends, raw.(*Job))
		}
	}
	it, err = txn.Get(tableJobs, "state", string(lifecycle.JobHeld))
	if err != nil {
		return err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if adopting(raw.(*Job)) {
			ends = append(ends, raw.(*Job))
		}
	}
	for _, old := range ends {
		j := clone(old)
		var on []string
		for _, c := range j.Containers {
			if c.Node != "" && !slices.Contains(on, c.Node) {
				on = append(on, c.Node)
			}
		}
		failAdopted(j, now, fmt.Sprintf("it ran on node %s after the backup this state was restored from, but not every node of its gang reported it by the end of the adoption window; stopped at the restore, not run twice", strings.Join(on, ", ")))
		j.ModifyIndex = index
		if err := txn.Insert(tableJobs, j); err != nil {
			return err
		}
	}
	return nil
}

// adopting tells whether queued j has a container a node reported
// running (adopt) and waits for the rest: it is not placed again.
func adopting(j *Job) bool {
	if j.State != lifecycle.JobPending && j.State != lifecycle.JobHeld {
		return false
	}
	for _, c := range j.Containers {
		if c.Node != "" {
			return true
		}
	}
	return false
}

// Adopting tells whether queued j has a container a node runs that the
// state adopted (see adopt), the others not yet: the scheduler places
// it not.
func (j *Job) Adopting() bool { return adopting(j) }

// newAdopted is the row of a job submitted after the backup a restore
// brought back that a node reports running or ended (u, an announcement
// or a kept end that carries the node's copy of the job,
// ContainerUpdate.Job), within the adoption window: queued, its
// containers unplaced, for adopt to place them where they run or ran (a
// job whose every container has ended so ends as it did: its outcome,
// nodes, start, end and exit code, and reaches the accounting store as
// any ended job). The node's copy is what schedd assigned it: the job's
// owner, ids, directory, partition, walltime, job file and containers
// (an element of a job array: adoptElement). The submission time is not
// in it: the earliest start a node reports stands for it (an end's
// Started, a running update's At). nil when u does not qualify: no
// copy, outside the window, an id the restored state accounts for (such
// a job ended, or is another), a copy of another job or run, or an
// element whose array gave its index a turn already.
func newAdopted(txn *memdb.Txn, index uint64, u ContainerUpdate, now time.Time) (*Job, error) {
	a := u.Job
	until, above := adoption(txn)
	if a == nil || !now.Before(until) || u.JobID <= above || a.ID != u.JobID || a.SessionID == "" ||
		a.SessionID != u.Session || a.Requeues != u.Requeues || len(a.Containers) == 0 ||
		(u.State != lifecycle.ContainerRunning && !u.State.Ended()) {
		return nil, nil
	}
	if !slices.ContainsFunc(a.Containers, func(c Container) bool { return c.Host == u.Host }) {
		return nil, nil
	}
	submitted := u.At // a running update's At is its start
	if u.State.Ended() {
		submitted = u.Started
	}
	if submitted.IsZero() || submitted.After(now) {
		submitted = now
	}
	j := &Job{ID: a.ID, SessionID: a.SessionID, Network: a.Network, Name: a.Name, User: a.User, UID: a.UID, GID: a.GID,
		Cwd: a.Cwd, Partition: a.Partition, Account: a.Account, Walltime: a.Walltime, Spec: a.Spec, Interactive: a.Interactive,
		Requeues: a.Requeues, Signals: a.Signals, State: lifecycle.JobPending, Submitted: submitted,
		Reason: "adopted after a restore: submitted after the backup, reported running by its nodes"}
	for _, c := range a.Containers {
		rc := c
		rc.Node, rc.NodeAddr, rc.Reach, rc.State, rc.ExitCode, rc.Message = "", "", "", lifecycle.ContainerPending, 0, ""
		rc.CPUTime, rc.MemPeak, rc.Ended = 0, 0, time.Time{}
		j.Containers = append(j.Containers, rc)
	}
	if a.ArrayID != 0 {
		if ok, err := adoptElement(txn, index, j, a, now); !ok || err != nil {
			return nil, err
		}
	}
	return j, nil
}

// AdoptingAfter is, once the adoption window has closed by now, the
// jobs still adopting (a gang not every node of which reported it): the
// leader ends them, with AdoptEnd when every peer reads
// SchemaAdoptWindow, else one Kill each. None while the window is open
// or when there is none.
func (v *Snapshot) AdoptingAfter(now time.Time) []uint64 {
	until, _ := adoption(v.txn)
	if until.IsZero() || now.Before(until) {
		return nil
	}
	var ids []uint64
	for _, st := range []lifecycle.JobState{lifecycle.JobPending, lifecycle.JobHeld} {
		it, err := v.txn.Get(tableJobs, "state", string(st))
		if err != nil {
			panic(err)
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			if adopting(raw.(*Job)) {
				ids = append(ids, raw.(*Job).ID)
			}
		}
	}
	return ids
}
