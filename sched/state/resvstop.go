package state

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// Stopping the jobs in a window's way. A reservation made with the flag
// stop_jobs (Reservation.StopJobs) clears its nodes when its window
// opens: the leader finds the jobs still running there that are not the
// reservation's own and proposes StopReserved with them. Each is stopped
// as a preemption victim is (Job.Preempt, with the reservation's name in
// place of a preempting job): its warning signal first when its job file
// asks for one, then SIGTERM and, after its partition's grace time,
// SIGKILL; once every container has ended it goes back to the queue with
// its id, a new run (the job or its partition asks for requeue), or ends
// CANCELLED with a reason naming the reservation. Without the flag the
// running jobs are left alone, as before.

// StopReserved stops the jobs running on reservation Reservation's nodes
// as its window opens (the leader). Requeue lists the partitions that
// requeue their jobs, as the leader's config says. A reservation's act:
// schema 11 on (SchemaReservations).
type StopReserved struct {
	Reservation string   `json:"reservation"`
	Jobs        []uint64 `json:"jobs"`
	Requeue     []string `json:"requeue_partitions,omitempty"`
}

// CmdStopReserved is StopReserved's kind.
const CmdStopReserved = "reservation-stop"

func (StopReserved) Kind() string { return CmdStopReserved }

// inTheWay reports whether live job j holds a live container on one of
// r's nodes and is not r's own, nor stopping already.
func inTheWay(j *Job, r *Reservation) bool {
	if j.State.Terminal() || j.State == lifecycle.JobPending || j.State == lifecycle.JobHeld || j.KillWanted ||
		j.Array != nil || j.preempting() || j.Reservation == r.Name {
		return false
	}
	return slices.ContainsFunc(j.Containers, func(c Container) bool {
		return c.Node != "" && !c.State.Ended() && slices.Contains(r.Nodes, c.Node)
	})
}

// InTheWay lists, in id order, the jobs to stop at now for the
// reservations with stop_jobs whose window is open: one reservation's
// name and its jobs, the first by name that has any ("" none).
func (v *Snapshot) InTheWay(now time.Time) (string, []uint64) {
	for _, r := range v.Reservations() {
		if !r.StopJobs {
			continue
		}
		if s, _, ok := r.Window(now); !ok || now.Before(s) {
			continue
		}
		var ids []uint64
		seen := map[uint64]bool{}
		for _, n := range r.Nodes {
			it, err := v.txn.Get(tableJobs, "node", n)
			if err != nil {
				panic(err)
			}
			for raw := it.Next(); raw != nil; raw = it.Next() {
				j := raw.(*Job)
				if !seen[j.ID] && inTheWay(j, r) {
					seen[j.ID] = true
					ids = append(ids, j.ID)
				}
			}
		}
		if len(ids) > 0 {
			slices.Sort(ids)
			return r.Name, ids
		}
	}
	return "", nil
}

// stopReserved applies s at now: every job it names that is still in
// the way of its reservation's open window is stopped (see above). A
// reservation deleted, without stop_jobs, or whose window is not open
// (the act came late) stops nothing.
func stopReserved(txn *memdb.Txn, index uint64, now time.Time, s StopReserved) error {
	raw, err := txn.First(tableReservations, "id", s.Reservation)
	if err != nil || raw == nil {
		return err
	}
	r := raw.(*Reservation)
	if start, _, ok := r.Window(now); !r.StopJobs || !ok || now.Before(start) {
		return nil
	}
	ids := slices.Clone(s.Jobs)
	slices.SortFunc(ids, cmp.Compare)
	for _, id := range slices.Compact(ids) {
		j, err := getJob(txn, id)
		if err != nil || !inTheWay(j, r) {
			continue
		}
		mode := PreemptCancel
		if (j.Spec.Requeue || slices.Contains(s.Requeue, j.Partition)) && !j.Cancelled && !j.TimedOut {
			mode = PreemptRequeue
		}
		warnJob(j, now) // before the stop: its grace counts from here
		j.Preempt = &PreemptRecord{At: now, Mode: mode, Run: j.Requeues, Reservation: r.Name}
		j.KillWanted, j.ModifyIndex = true, index
		if err := txn.Insert(tableJobs, j); err != nil {
			return err
		}
	}
	return nil
}

// reservedStopWhy is why a job stopped for reservation name ends its run.
func reservedStopWhy(name string) string {
	return fmt.Sprintf("reservation %s opened on its nodes", name)
}
