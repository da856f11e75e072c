package state

import (
	"slices"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
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
//   - the accounting store's ended runs (ended): a job the snapshot shows
//     queued or running whose run (or a later one) the store holds ended
//     ends with the stored outcome (state, exit code, reason, times,
//     usage);
//   - the highest job id the accounting store holds (floor): the id
//     counter starts above it and above the live state's (which the
//     nodes' reports of jobs it does not hold have raised), so no id is
//     handed out twice.
//
// The dump's table indexes move to at least the live state's, so a
// blocking query waiting at the live state's index does not see the
// state go back.
type RestoreFacts struct {
	Live  *Snapshot           // the state being replaced; nil: none
	Ended map[uint64]EndedRun // each job's latest ended run in the accounting store
	Floor uint64              // the highest job id the accounting store holds
}

// Reconciled says what ReconcileDump changed.
type Reconciled struct {
	LastJobID uint64   // the id counter after the restore: the next job gets LastJobID+1
	Newer     []uint64 // jobs whose row the live state had newer
	Kept      []uint64 // jobs submitted after the snapshot, kept from the live state
	Ended     []uint64 // jobs ended with their outcome from the accounting store
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
		h, ok := f.Ended[j.ID]
		if !ok || j.State.Terminal() || j.Array != nil || h.Requeues < j.Requeues || !h.State.Terminal() {
			continue
		}
		d.Jobs[i] = endedFrom(j, &h)
		r.Ended = append(r.Ended, j.ID)
	}
	last = max(last, f.Floor)
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
