package state

import (
	"slices"
	"time"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
	"github.com/troupe-hpc/troupe/internal/reason"
)

// A restore (badmin snapshot restore) puts an older state in force, but
// what happened to jobs since it was saved did happen: a job that ended
// has ended, a job that started runs, a job id that was given stays
// given. ReconcileDump brings those facts into the dump before it is put
// in force, from what schedd knows when it restores:
//
//   - the state it replaces (live), when it descends from the same
//     cluster: its rows are newer than the snapshot's for the same job
//     (same id and submit time), and the jobs submitted since the
//     snapshot (ids above the snapshot's last) are kept;
//   - the accounting store's records of the job's runs (ended): a job the
//     snapshot shows queued or running whose run (or a later one) the
//     store holds ended ends with the stored outcome (state, exit code,
//     reason, times, usage); the runs a requeue ended since the snapshot
//     (REQUEUED records) are kept as its earlier runs (Job.Runs), and a
//     job whose last stored run was requeued is queued as the run after
//     it, so no run is recorded twice under one number;
//   - the highest job id the accounting store holds (floor): the id
//     counter starts above it and above the live state's (which the
//     nodes' reports of jobs it does not hold have raised), so no id is
//     handed out twice.
//
// The dump's table indexes move to at least the live state's, so a
// blocking query waiting at the live state's index does not see the
// state go back.
type RestoreFacts struct {
	Live  *Snapshot             // the state being replaced; nil: none
	Ended map[uint64][]EndedRun // each job's runs in the accounting store (ended or REQUEUED), any order
	Floor uint64                // the highest job id the accounting store holds
}

// Reconciled says what ReconcileDump changed.
type Reconciled struct {
	LastJobID uint64 // the id counter after the restore: the next job gets LastJobID+1
	// Accounted is the highest job id the snapshot and the accounting
	// store account for (the live state's counter left out: a node's
	// report of a job it does not hold raises it).
	Accounted uint64
	Newer     []uint64 // jobs whose row the live state had newer
	Kept      []uint64 // jobs submitted after the snapshot, kept from the live state
	Ended     []uint64 // jobs ended with their outcome from the accounting store
	Requeued  []uint64 // jobs moved to a later run: the store holds their run requeued
	Dropped   []uint64 // live jobs with an id the snapshot gave to another job (not kept)
}

// ReconcileDump applies f to d (see RestoreFacts); d's rows are replaced,
// never modified in place.
func ReconcileDump(d *Dump, f RestoreFacts) Reconciled {
	var r Reconciled
	last := dumpLastJobID(d)
	snapLast := last
	byID := map[uint64]int{}
	for i, j := range d.Jobs {
		byID[j.ID] = i
	}
	var liveIdx uint64
	if f.Live != nil {
		liveIdx, _ = f.Live.Index()
		last = max(last, f.Live.LastJobID())
		for _, lj := range f.Live.Jobs() {
			i, ok := byID[lj.ID]
			switch {
			case ok && sameJob(d.Jobs[i], lj):
				if d.Jobs[i] != lj && d.Jobs[i].ModifyIndex != lj.ModifyIndex {
					r.Newer = append(r.Newer, lj.ID)
				}
				d.Jobs[i] = lj
			case ok || lj.ID <= snapLast:
				// The snapshot gave this id to another job (or purged
				// it): the live row is another history's.
				r.Dropped = append(r.Dropped, lj.ID)
			default:
				byID[lj.ID] = len(d.Jobs)
				d.Jobs = append(d.Jobs, lj)
				r.Kept = append(r.Kept, lj.ID)
			}
		}
		slices.SortFunc(d.Jobs, func(a, b *Job) int {
			switch {
			case a.ID < b.ID:
				return -1
			case a.ID > b.ID:
				return 1
			}
			return 0
		})
	}
	for i, j := range d.Jobs {
		recs := f.Ended[j.ID]
		if len(recs) == 0 || j.State.Terminal() || j.Array != nil {
			continue
		}
		e, ended, requeued := fromRuns(j, recs)
		switch {
		case ended:
			r.Ended = append(r.Ended, j.ID)
		case requeued:
			r.Requeued = append(r.Requeued, j.ID)
		}
		d.Jobs[i] = e
	}
	last = max(last, f.Floor)
	r.Accounted = max(snapLast, f.Floor)
	for _, j := range d.Jobs {
		last = max(last, j.ID)
	}
	r.LastJobID = last
	setIndex := func(table string, idx uint64) {
		for _, e := range d.Indexes {
			if e.Table == table {
				e.Index = max(e.Index, idx)
				return
			}
		}
		d.Indexes = append(d.Indexes, &indexEntry{Table: table, Index: idx})
	}
	// The dump's entries may be shared with the snapshot file's decode
	// only: copy before raising them.
	for i, e := range d.Indexes {
		c := *e
		d.Indexes[i] = &c
	}
	setIndex(lastIDEntry, last)
	if liveIdx > 0 {
		for _, t := range []string{tableJobs, tableNodes, tableSettings} {
			setIndex(t, liveIdx)
		}
	}
	return r
}

// dumpLastJobID is the highest job id d has given.
func dumpLastJobID(d *Dump) uint64 {
	var last uint64
	for _, j := range d.Jobs {
		last = max(last, j.ID)
	}
	for _, e := range d.Indexes {
		if e.Table == lastIDEntry {
			last = max(last, e.Index)
		}
	}
	return last
}

// sameJob tells whether two rows with one id are the same job: the same
// submit (time and user).
func sameJob(a, b *Job) bool {
	return a.Submitted.Equal(b.Submitted) && a.User == b.User
}

// fromRuns is j as its runs in the accounting store (recs) say: each
// run a requeue ended that j does not keep yet becomes one of its Runs
// (Runs[i] is run i: only from the one after its last, in order); an
// ended record of its current run or a later one ends it with that
// outcome (ended); otherwise a REQUEUED record of its current run or a
// later one moves it to the run after (requeued), queued, its
// containers unplaced. j is not modified.
func fromRuns(j *Job, recs []EndedRun) (out *Job, ended, requeued bool) {
	recs = slices.Clone(recs)
	slices.SortFunc(recs, func(a, b EndedRun) int { return a.Requeues - b.Requeues })
	out = j
	var last *EndedRun
	for i := range recs {
		h := &recs[i]
		if h.Requeues < j.Requeues {
			continue
		}
		if h.State.Terminal() {
			if out == j {
				out = clone(j)
			}
			keepRuns(out, recs, h.Requeues)
			return endedFrom(out, h), true, false
		}
		if h.State == lifecycle.JobRequeued {
			last = h
		}
	}
	if last == nil {
		return j, false, false
	}
	out = clone(j)
	keepRuns(out, recs, last.Requeues+1)
	if out.State != lifecycle.JobHeld {
		out.State, out.Reason = lifecycle.JobPending, reason.Waiting(false, false, false)
	}
	out.Requeues, out.LastRequeue = last.Requeues+1, last.Reason
	out.KillWanted, out.ExitCode, out.CPUTime, out.MemPeak = false, 0, 0, 0
	out.Started, out.Ended = time.Time{}, time.Time{}
	for i := range out.Containers {
		c := &out.Containers[i]
		c.Node, c.NodeAddr, c.Reach, c.GPUs = "", "", "", nil
		c.State, c.ExitCode, c.Message = lifecycle.ContainerPending, 0, ""
		c.CPUTime, c.MemPeak, c.Ended = 0, 0, time.Time{}
	}
	return out, false, true
}

// keepRuns appends to j.Runs, in order, the REQUEUED records of recs
// (sorted by run) for the runs after those it keeps, up to run upto
// (excluded); it stops at a gap, so Runs[i] stays run i. j is a clone.
func keepRuns(j *Job, recs []EndedRun, upto int) {
	for i := range recs {
		h := &recs[i]
		if h.State != lifecycle.JobRequeued || h.Requeues != len(j.Runs) || h.Requeues >= upto {
			continue
		}
		run := Run{Started: h.Started, Ended: h.Ended, Reason: h.Reason, ExitCode: h.ExitCode, CPUTime: h.CPUTime, MemPeak: h.MemPeak,
			Containers: slices.Clone(h.Containers)}
		j.Runs = append(slices.Clip(j.Runs), run)
	}
}

// endedFrom is j ended as its accounting record h says.
func endedFrom(j *Job, h *EndedRun) *Job {
	e := clone(j)
	e.State, e.Reason, e.ExitCode = h.State, h.Reason, h.ExitCode
	e.Requeues = h.Requeues
	e.Started, e.Ended = h.Started, h.Ended
	e.CPUTime, e.MemPeak = h.CPUTime, h.MemPeak
	e.KillWanted = false
	for i := range e.Containers {
		c := &e.Containers[i]
		for _, hc := range h.Containers {
			if hc.Host != c.Host {
				continue
			}
			c.State, c.ExitCode, c.Message = hc.State, hc.ExitCode, hc.Message
			c.CPUTime, c.MemPeak = hc.CPUTime, hc.MemPeak
			if hc.Node != "" {
				c.Node = hc.Node
			}
		}
		if !c.State.Ended() {
			// The record does not name it: it ended with the job.
			c.State = lifecycle.ContainerKilled
			if h.State == lifecycle.JobCompleted {
				c.State = lifecycle.ContainerExited
			}
		}
	}
	return e
}
