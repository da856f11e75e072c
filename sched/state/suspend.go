package state

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/go-memdb"
	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// Gang suspension and the warning signal.
//
// A running job is suspended whole (Suspend): its nodelets freeze every
// container of its session through the cgroup freezer, its CPUs and
// GPUs count as free for other jobs while its memory stays held, and its
// walltime does not run (Job.SuspendedFor). A resume (Resume) is a
// wish: the leader resumes the job (Resumed) once its CPUs and GPUs on
// its own nodes are free again, so that no node is ever promised twice.
//
// A job whose file asks for a warning signal (Spec.Signal) gets it once
// a run (Warn, Job.Warned): its Before ahead of the end of its walltime,
// or at once when preemption chooses to stop it (cancel, requeue: in
// the plan's own entry, ahead of its stop; a job preempted by suspension
// loses nothing and gets none then). The warning is one more
// signal request of the job, delivered by its nodelets as bkill -s's
// are; Warned keeps a new leader from sending it again.
//
// The four acts are schema 11's (SuspendSchema, Command.NeedsSchema):
// the leader proposes none while a peer of an older release reads the
// log.

// SuspendSchema is the first schema that has gang suspension and
// warning signals: their acts, and a row's Suspended, SuspendedFor,
// Warned and Spec.Signal.
const SuspendSchema = 11

// Suspend freezes running job Job's containers (badmin jsuspend,
// scontrol suspend, preemption). Apply answers the job.
type Suspend struct {
	Job    uint64 `json:"job"`
	Reason string `json:"reason,omitempty"`
	// Resume: resume the job by itself as soon as its CPUs and GPUs are
	// free again (a preempted job's, once the job that took them ends).
	Resume bool `json:"resume,omitempty"`
	// By is who asked (an admin's name; empty: schedd).
	By      string  `json:"by,omitempty"`
	Request Request `json:"request,omitzero"`
}

// Resume asks that suspended job Job resume (badmin jresume, scontrol
// resume): it does once its CPUs and GPUs are free (Resumed). Apply
// answers the job.
type Resume struct {
	Job     uint64  `json:"job"`
	Request Request `json:"request,omitzero"`
}

// Resumed thaws suspended jobs whose CPUs and GPUs are free again (the
// leader).
type Resumed struct {
	Jobs []uint64 `json:"jobs"`
}

// Warn sends the warning signals of jobs (the leader, at their
// walltime's warning time), and says why ("walltime"). A preemption's
// victims get theirs in the plan's own entry.
type Warn struct {
	Jobs []uint64 `json:"jobs"`
	Why  string   `json:"why,omitempty"`
}

// Suspension is a running job's gang suspension (its row's Suspended).
type Suspension struct {
	// Since is when it was suspended.
	Since time.Time `json:"since"`
	// Reason says why: an admin's request, or the job that preempted it.
	Reason string `json:"reason,omitempty"`
	// By is who asked (an admin's name, or "schedd").
	By string `json:"by,omitempty"`
	// ResumeWanted: the job resumes as soon as its CPUs and GPUs on its
	// nodes are free again.
	ResumeWanted bool `json:"resume_wanted,omitempty"`
}

// Warning is the signal a job asks for before it is stopped (its Spec's
// Signal), as admission checked it: Signal, sent Before its walltime
// ends (and at once when preemption chooses to stop it), to main1 alone
// or, To WarnAll, to every container. Its JSON is the job file's.
type Warning struct {
	// Signal is the signal's name without SIG, upper case ("USR1"), or
	// its number ("10").
	Signal string        `json:"name"`
	Before time.Duration `json:"before"`
	To     string        `json:"to,omitempty"`
}

// WarnAll sends a warning signal to every container (Warning.To); any
// other To sends it to main1 alone.
const WarnAll = "all"

// number is w's signal's number, 0 when it names none.
func (w *Warning) number() int {
	if n, err := strconv.Atoi(w.Signal); err == nil {
		if n < 1 || n > 64 {
			return 0
		}
		return n
	}
	return int(unix.SignalNum("SIG" + w.Signal))
}

// ErrNotSuspendable marks a job that cannot be suspended or resumed now
// (errors.Is(ErrConflict) as well).
var ErrNotSuspendable = errors.New("job cannot be suspended or resumed now")

type suspendError struct{ msg string }

func (e *suspendError) Error() string { return e.msg }
func (e *suspendError) Is(target error) bool {
	return target == ErrConflict || target == ErrNotSuspendable
}

func notSuspendable(format string, args ...any) error {
	return &suspendError{msg: fmt.Sprintf(format, args...)}
}

// suspendJob suspends running job s.Job for s.By at now. Preemption's
// act may call it on a victim in its own transaction.
func suspendJob(txn *memdb.Txn, index uint64, now time.Time, s Suspend) (*Job, error) {
	j, err := getJob(txn, s.Job)
	if err != nil {
		return nil, err
	}
	switch {
	case j.State.Terminal():
		return nil, fmt.Errorf("job %d: %w (%s)", j.ID, ErrEnded, j.State)
	case j.Array != nil:
		return nil, notSuspendable("job %d is a job array: suspend its running elements one by one (\"%d[INDEX]\")", j.ID, j.ID)
	case j.Suspended != nil:
		return nil, notSuspendable("job %d is already suspended (since %s)", j.ID, j.Suspended.Since.UTC().Format(time.RFC3339))
	case j.KillWanted:
		return nil, notSuspendable("job %d is being stopped", j.ID)
	case j.State != lifecycle.JobRunning:
		return nil, notSuspendable("job %d is %s: only a running job can be suspended (hold a pending one)", j.ID, j.State)
	}
	by := s.By
	if by == "" {
		by = "schedd"
	}
	j.Suspended = &Suspension{Since: now, Reason: s.Reason, By: by, ResumeWanted: s.Resume}
	j.ModifyIndex = index
	return j, txn.Insert(tableJobs, j)
}

// resumeWanted asks that suspended job id resume: the leader resumes it
// (Resumed) once its CPUs and GPUs are free.
func resumeWanted(txn *memdb.Txn, index uint64, id uint64) (*Job, error) {
	j, err := getJob(txn, id)
	if err != nil {
		return nil, err
	}
	switch {
	case j.State.Terminal():
		return nil, fmt.Errorf("job %d: %w (%s)", j.ID, ErrEnded, j.State)
	case j.Suspended == nil:
		return nil, notSuspendable("job %d is %s, not suspended: nothing to resume", j.ID, j.State)
	case j.Suspended.ResumeWanted:
		return j, nil
	}
	sp := *j.Suspended
	sp.ResumeWanted = true
	j.Suspended, j.ModifyIndex = &sp, index
	return j, txn.Insert(tableJobs, j)
}

// resumed ends the suspension of the jobs in ids that are still
// suspended: their time suspended is added to SuspendedFor (their
// walltime runs again from now) and their nodelets thaw them.
func resumed(txn *memdb.Txn, index uint64, now time.Time, ids []uint64) error {
	for _, id := range ids {
		j, err := getJob(txn, id)
		if err != nil || j.Suspended == nil || j.State.Terminal() {
			continue
		}
		endSuspension(j, now)
		if j.preempting() && j.Preempt.Mode == PreemptSuspend {
			pr := *j.Preempt
			pr.Resumed = now
			j.Preempt = &pr
		}
		j.ModifyIndex = index
		if err := txn.Insert(tableJobs, j); err != nil {
			return err
		}
	}
	return nil
}

// endSuspension ends j's suspension at now, if any.
func endSuspension(j *Job, now time.Time) {
	if j.Suspended == nil {
		return
	}
	if d := now.Sub(j.Suspended.Since); d > 0 {
		j.SuspendedFor += d
	}
	j.Suspended = nil
}

// newRun clears what a run's suspension and warning left on j, as a
// requeue starts its next run.
func newRun(j *Job) {
	j.Suspended, j.SuspendedFor, j.Warned = nil, 0, time.Time{}
}

// warn records the warning signal of each job in w that asks for one
// and has not had it this run.
func warn(txn *memdb.Txn, index uint64, now time.Time, w Warn) error {
	for _, id := range w.Jobs {
		j, err := getJob(txn, id)
		if err != nil {
			continue
		}
		if !warnJob(j, now) {
			continue
		}
		j.ModifyIndex = index
		if err := txn.Insert(tableJobs, j); err != nil {
			return err
		}
	}
	return nil
}

// warnJob adds j's warning signal to its signal requests, once a run,
// while it runs (a suspended job gets it too: it is delivered as it is
// thawed); it reports whether it did. Preemption calls it on a victim
// (in the transaction that chooses it) before its grace begins.
func warnJob(j *Job, now time.Time) bool {
	w := j.Spec.Signal
	if w == nil || !j.Warned.IsZero() || j.State != lifecycle.JobRunning || j.KillWanted || j.Array != nil {
		return false
	}
	sig := w.number()
	if sig == 0 {
		return false // admission checked it: a row from elsewhere
	}
	host := ""
	if w.To != WarnAll {
		host = mainHost(j)
	}
	j.Signals = append(slices.Clip(j.Signals), SignalRequest{
		Seq: uint64(len(j.Signals)) + 1, Signal: sig, Host: host, Time: now,
	})
	j.Warned = now
	return true
}

// mainHost is j's main1's host name.
func mainHost(j *Job) string {
	for _, c := range j.Containers {
		if c.Role == RoleMain && c.Idx == 1 {
			return c.Host
		}
	}
	if len(j.Containers) > 0 {
		return j.Containers[0].Host
	}
	return ""
}

// Deadline is where j's walltime ends: its start plus its walltime plus
// the time it spent suspended; zero while it is suspended (its walltime
// does not run), without a walltime or before it started.
func (j *Job) Deadline() time.Time {
	if j.Started.IsZero() || j.Walltime <= 0 || j.Suspended != nil {
		return time.Time{}
	}
	return j.Started.Add(j.Walltime + j.SuspendedFor)
}

// WarnAt is when j's warning signal is due: its Before ahead of its
// Deadline; zero when it asks for none, had it this run, or has no
// deadline now.
func (j *Job) WarnAt() time.Time {
	d := j.Deadline()
	if j.Spec.Signal == nil || !j.Warned.IsZero() || d.IsZero() || j.KillWanted {
		return time.Time{}
	}
	return d.Add(-j.Spec.Signal.Before)
}

// Warnings lists the running jobs whose warning signal is due at now,
// and the earliest time another one will be (zero: none).
func (v *Snapshot) Warnings(now time.Time) (due []uint64, next time.Time) {
	for _, j := range v.JobsIn(lifecycle.JobRunning) {
		at := j.WarnAt()
		switch {
		case at.IsZero() || j.Array != nil:
		case !at.After(now):
			due = append(due, j.ID)
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	return due, next
}

// Suspended lists the suspended jobs, longest suspended first.
func (v *Snapshot) Suspended() []*Job {
	var out []*Job
	for _, j := range v.JobsIn(lifecycle.JobRunning) {
		if j.Suspended != nil {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *Job) int {
		if c := a.Suspended.Since.Compare(b.Suspended.Since); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}
