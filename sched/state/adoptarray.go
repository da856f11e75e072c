package state

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
	"github.com/troupe-hpc/troupe/internal/reason"
)

// Elements of job arrays in the adoption window. A node's copy of an
// element (a row with ArrayID) names its array and index, and
// carries the array's request (Spec.Array: its indices, max_running):
//
//   - The array's row is in the state (submitted before the backup): the
//     element becomes its row there, made before its turn as a kill by
//     name makes one (api.Array.Early), unless the array has given that
//     index's turn already (its row ended or runs under another id) or
//     has ended. A queued, unplaced row the state made for that index
//     since the restore (never placed: the window holds placements) is
//     replaced by the node's.
//   - The array's row is not (submitted after the backup): it is rebuilt
//     from the copy (the owner, partition, job file, indices), queued,
//     its other elements given rows as any array's once the window has
//     closed; the element is made as above. Its submission time is the
//     element's start, its session id one of its own.
//   - A copy that cannot rebuild its array (no array in its request, or
//     an index outside it): the element is adopted as a plain job under
//     its own id, named NAME[INDEX], its reason naming its array while
//     it waits for the rest of its gang.
//
// While the window is open no array gets new element rows (settleArrays
// holds its refill): element ids given by the nodes, not yet reported,
// would be handed to other elements. CmdAdoptEnd refills them.

// adoptElement makes j, the row newAdopted makes from a, an element of
// its array (see above), rebuilding the array's row if need be, or a
// plain job that notes its array. False: the element is not adopted (its
// array gave its index a turn already, or ended).
func adoptElement(txn *memdb.Txn, index uint64, j *Job, a *Job, now time.Time) (bool, error) {
	raw, err := txn.First(tableJobs, "id", a.ArrayID)
	if err != nil {
		return false, err
	}
	var p *Job
	switch {
	case raw != nil && raw.(*Job).Array != nil:
		p = clone(raw.(*Job))
	case raw != nil:
		return false, nil // the id is another job's
	default:
		if p = rebuildArray(a, j.Submitted); p == nil {
			plainElement(j, a)
			return true, nil
		}
		p.ModifyIndex = index
		if err := txn.Insert(tableJobs, p); err != nil {
			return false, err
		}
	}
	if p.State.Terminal() || p.Cancelled {
		return false, nil
	}
	pos := p.Array.Indices.Position(a.ArrayIndex)
	if pos < 0 {
		return false, nil
	}
	old, err := element(txn, p.ID, a.ArrayIndex)
	if err != nil {
		return false, err
	}
	switch {
	case old != nil && (old.State != lifecycle.JobPending && old.State != lifecycle.JobHeld || adopting(old) || old.Requeues > 0):
		return false, nil // its index runs, ran or ended under another id
	case old != nil:
		// Made since the restore, never placed: the node's is the one.
		if err := txn.Delete(tableJobs, old); err != nil {
			return false, err
		}
	case pos < p.Array.Next || slices.Contains(p.Array.Early, a.ArrayIndex):
		return false, nil // its turn was given, and its row is gone: ended
	default:
		na := *p.Array
		na.Early = append(append([]int(nil), p.Array.Early...), a.ArrayIndex)
		slices.Sort(na.Early)
		p.Array = &na
		p.ModifyIndex = index
		if err := txn.Insert(tableJobs, p); err != nil {
			return false, err
		}
	}
	j.ArrayID, j.ArrayIndex = p.ID, a.ArrayIndex
	j.ArraySpan = &ArraySpan{Min: p.Array.Indices.Min(), Max: p.Array.Indices.Max(), Count: p.Array.Count, Step: p.Array.Indices.Step()}
	return true, nil
}

// rebuildArray is the row of the array a, an element's copy, belongs to,
// rebuilt from the copy: nil when the copy cannot say what it was (no
// array in its request, or the element's index outside it).
func rebuildArray(a *Job, submitted time.Time) *Job {
	if a.Spec.Array == nil {
		return nil
	}
	p := &Job{ID: a.ArrayID, Name: a.Name, User: a.User, UID: a.UID, GID: a.GID, Cwd: a.Cwd, Partition: a.Partition,
		Account: a.Account, Walltime: a.Walltime, Spec: a.Spec, State: lifecycle.JobPending, Reason: reason.Priority,
		Submitted: submitted}
	if err := newArray(p); err != nil || p.Array.Indices.Position(a.ArrayIndex) < 0 {
		return nil
	}
	// The array's own session id is not in the copy: one of its own,
	// the same on every replica.
	p.SessionID = uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "troupe-array/%d", a.ArrayID)).String()
	for _, c := range a.Containers {
		rc := c
		rc.KernelID, rc.Node, rc.NodeAddr, rc.Reach, rc.State, rc.ExitCode, rc.Message = "", "", "", "", lifecycle.ContainerPending, 0, ""
		rc.CPUTime, rc.MemPeak, rc.Ended, rc.GPUs = 0, 0, time.Time{}, nil
		p.Containers = append(p.Containers, rc)
	}
	sessionNetwork(p)
	return p
}

// plainElement makes j, an element whose array cannot be rebuilt, a
// plain job that names its array (NAME[INDEX], its reason while queued).
func plainElement(j *Job, a *Job) {
	j.Name = fmt.Sprintf("%s[%d]", a.Name, a.ArrayIndex)
	j.Spec.Array = nil
	j.Reason = fmt.Sprintf("adopted after a restore as a plain job: element %d[%d] of an array the restored state lacks and its copy cannot rebuild", a.ArrayID, a.ArrayIndex)
}

// holdRefill tells whether c, applied to the state in txn, gives no
// array new element rows: an entry of SchemaAdoptWindow on, within the
// adoption window.
func holdRefill(txn *memdb.Txn, c Command) bool {
	if !adoptWindow(c.Version) {
		return false
	}
	until, _ := adoption(txn)
	return c.Time.Before(until)
}

// touchArrays rewrites the row of every array not ended, so that
// settleArrays, after CmdAdoptEnd, gives them the element rows the
// adoption window held back.
func touchArrays(txn *memdb.Txn, index uint64) error {
	for _, st := range []lifecycle.JobState{lifecycle.JobPending, lifecycle.JobHeld, lifecycle.JobRunning} {
		js, err := jobsBy(txn, "state", string(st))
		if err != nil {
			return err
		}
		for _, j := range js {
			if j.Array == nil {
				continue
			}
			j = clone(j)
			j.ModifyIndex = index
			if err := txn.Insert(tableJobs, j); err != nil {
				return err
			}
		}
	}
	return nil
}
