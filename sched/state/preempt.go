package state

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
	"github.com/troupe-hpc/troupe/internal/reason"
)

// Preemption modes, as partitions.hcl spells them.
const (
	PreemptCancel  = "cancel"
	PreemptRequeue = "requeue"
	PreemptSuspend = "suspend"
)

// Preemption is one running job a plan stops (or suspends) for a pending
// one: the scheduler core's choice, as the log carries it.
type Preemption struct {
	Victim uint64 `json:"victim"`
	By     uint64 `json:"by"`
	Mode   string `json:"mode"`
}

// PreemptRecord is a job's last preemption: which job it was stopped
// (or suspended) for, when the scheduler chose it, how, and the run it
// stopped (the job's Requeues then).
type PreemptRecord struct {
	By   uint64    `json:"by"`
	At   time.Time `json:"at"`
	Mode string    `json:"mode"`
	Run  int       `json:"run"`
	// Resumed is when a job suspended by the preemption resumed (zero:
	// not yet): the preemption is over, the run goes on.
	Resumed time.Time `json:"resumed,omitzero"`
	// Reservation names the reservation (stop_jobs) the job was stopped
	// for as its window opened, By then 0.
	Reservation string `json:"reservation,omitempty"`
}

// SchemaPreempt is the first schema whose plans carry preemptions: the
// leader plans none while a peer reads an older one (it would not stop
// the victims).
const SchemaPreempt = 11

// preemptRuns tells whether an entry of schema version v applies a
// plan's preemptions (SchemaPreempt on). An older entry carries none.
func preemptRuns(v int) bool { return v >= SchemaPreempt }

// preempt applies a plan's preemptions at now. A victim that is no
// longer running (it ended, or was killed) since the scheduler's
// snapshot is skipped: the preemptor, still pending, is planned anew.
// Each victim records who it was stopped for and when (Job.Preempt),
// the preemptor the jobs it stopped (Job.Preempted). A victim to stop
// gets its warning signal at once if its job file asks for one
// (warnJob), in the same entry as its stop: its nodelets deliver it
// before the TERM. A suspended victim loses nothing and gets none here:
// its warning stays for its walltime's end. With mode cancel or requeue
// the victim's containers are stopped (TERM, then KILL after its
// partition's grace_time): once all have ended it ends PREEMPTED, or
// goes back to PENDING with its id, its run kept (settlePreempted).
// With mode suspend the victim's whole gang is suspended in this same
// entry, with reason Preempted (the preemptor is in Job.Preempt), asked
// to resume by itself (suspendJob, Resume): no pass can thaw it before
// the preemptor is placed on its CPUs and GPUs, and the leader resumes
// it once they are free again (resumable). A victim that cannot be
// suspended now is skipped.
func preempt(txn *memdb.Txn, index uint64, now time.Time, ps []Preemption) error {
	for _, p := range ps {
		j, err := getJob(txn, p.Victim)
		if err != nil {
			return err
		}
		if j.State.Terminal() || j.State == lifecycle.JobPending || j.State == lifecycle.JobHeld || j.KillWanted || j.Array != nil ||
			j.preempting() {
			continue
		}
		if p.Mode == PreemptSuspend {
			s := Suspend{Job: j.ID, Reason: reason.Preempted, Resume: true}
			if _, err := suspendJob(txn, index, now, s); errors.Is(err, ErrNotSuspendable) {
				continue
			} else if err != nil {
				return fmt.Errorf("preempting job %d for job %d: %w", j.ID, p.By, err)
			}
			if j, err = getJob(txn, p.Victim); err != nil {
				return err
			}
		}
		if p.Mode != PreemptSuspend {
			warnJob(j, now)
		}
		j.Preempt = &PreemptRecord{By: p.By, At: now, Mode: p.Mode, Run: j.Requeues}
		if p.Mode != PreemptSuspend {
			j.KillWanted = true
		}
		j.ModifyIndex = index
		if err := txn.Insert(tableJobs, j); err != nil {
			return err
		}
		by, err := getJob(txn, p.By)
		if err != nil {
			continue // the preemptor is gone: the victim stops all the same
		}
		by.Preempted = append(slices.Clip(by.Preempted), p.Victim)
		by.ModifyIndex = index
		if err := txn.Insert(tableJobs, by); err != nil {
			return err
		}
	}
	return nil
}

// preempting reports whether j's current run is being preempted: stopped,
// or suspended and not yet resumed.
func (j *Job) preempting() bool {
	return j.Preempt != nil && j.Preempt.Run == j.Requeues && j.Preempt.Resumed.IsZero()
}

// ResumeWaitsOn is the job a suspended j waits on before it may resume:
// the job that preempted it while that one is still pending (not yet
// placed on what j lent it); 0 when none. A resume must not take back
// the CPUs and GPUs that job was given them for.
func (j *Job) ResumeWaitsOn() uint64 {
	if j.Suspended == nil || !j.preempting() || j.Preempt.Mode != PreemptSuspend {
		return 0
	}
	return j.Preempt.By
}

// Stopping is the job a live j is being stopped (or suspended) for, 0
// when none: the scheduler expects its resources back now.
func (j *Job) Stopping() uint64 {
	if !j.preempting() || j.State.Terminal() || j.State == lifecycle.JobPending || j.State == lifecycle.JobHeld {
		return 0
	}
	return j.Preempt.By
}

// settlePreempted finishes a preempted job whose containers have all
// ended (advance made it terminal): in mode requeue it goes back to the
// queue with its id, the run kept in Runs (with runs), and waits with
// reason Preempted until the next pass ranks it. A job cancelled or
// timed out meanwhile ends as that.
func settlePreempted(j *Job, runs bool) {
	if !j.State.Terminal() || !j.preempting() || j.Cancelled || j.TimedOut {
		return
	}
	if r := j.Preempt.Reservation; r != "" {
		switch {
		case j.State == lifecycle.JobCancelled:
			j.Reason = "cancelled: " + reservedStopWhy(r)
		case j.Preempt.Mode == PreemptRequeue:
			requeueJob(j, j.Ended, nil, "requeued: "+reservedStopWhy(r), runs)
		}
		return
	}
	if j.State == lifecycle.JobPreempted {
		j.Reason = fmt.Sprintf("preempted by job %d", j.Preempt.By)
		return
	}
	if j.Preempt.Mode != PreemptRequeue {
		return
	}
	end := j.Ended
	requeueJob(j, end, nil, fmt.Sprintf("requeued: preempted by job %d", j.Preempt.By), runs)
	j.Reason = reason.Preempted
}
