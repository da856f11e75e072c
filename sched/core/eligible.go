package core

import (
	"slices"

	"github.com/troupe-hpc/troupe/internal/reason"
)

// The eligible stage, first of a pass: may a queued job be considered at
// all? A job that may not gets its reason and takes no further part in
// the pass: it is not ranked, blocks nobody and holds no reservation.
// In this order, the first that applies:
//
//	held (Job.Held)                                  ──► Held
//	its dependency (Job.Depends) can never be met    ──► DependencyNeverSatisfied
//	its dependency is not met yet                    ──► Dependency
//	its partition does not take it (Partition.Jobs)  ──► PartitionLimit
//
// The dependency is decided here from the states of the jobs it names
// (Snapshot.Named), so schedd and bsim decide it alike.

// DepKind is what a dependency waits for in another job; the strings
// equal api.Dep*.
type DepKind string

// Dependency kinds.
const (
	DepDone    DepKind = "done"    // the job COMPLETED (Slurm afterok)
	DepExit    DepKind = "exit"    // the job ended other than COMPLETED (Slurm afternotok)
	DepEnded   DepKind = "ended"   // the job ended, however (Slurm afterany)
	DepStarted DepKind = "started" // the job started, or ended without starting (Slurm after)
)

// DepStatus is where a condition, or a whole dependency, stands; the
// strings equal api.Dep*.
type DepStatus string

// Dependency statuses.
const (
	DepWaiting   DepStatus = "waiting"   // may still be satisfied
	DepSatisfied DepStatus = "satisfied" // is satisfied
	DepNever     DepStatus = "never"     // can never be satisfied
)

// JobRef names a job, or with Element one element of job array ID.
type JobRef struct {
	ID      uint64
	Index   int
	Element bool
}

// JobStatus is what a dependency may ask of the job it names.
type JobStatus struct {
	// Started: the job started (was placed) at some time.
	Started bool
	// Ended: the job is over, however it ended.
	Ended bool
	// Completed: it ended COMPLETED (implies Ended).
	Completed bool
}

// Condition is one term of a dependency: Kind of job Job.
type Condition struct {
	Kind DepKind
	Job  JobRef
}

// Dependency is a job's dependency: every condition holds, or with Any
// one of them does.
type Dependency struct {
	Any        bool
	Conditions []Condition
}

// Eval is c's status given the status of the job it names.
func (c Condition) Eval(s JobStatus) DepStatus {
	switch c.Kind {
	case DepDone:
		switch {
		case s.Completed:
			return DepSatisfied
		case s.Ended:
			return DepNever
		}
	case DepExit:
		switch {
		case s.Completed:
			return DepNever
		case s.Ended:
			return DepSatisfied
		}
	case DepEnded:
		if s.Ended {
			return DepSatisfied
		}
	case DepStarted:
		if s.Ended || s.Started {
			return DepSatisfied
		}
	}
	return DepWaiting
}

// Status is d's status given the jobs it names (named); a job missing
// from named is gone, so its condition can never be met.
func (d *Dependency) Status(named map[JobRef]JobStatus) DepStatus {
	never := true // with Any: every condition is never
	all := true   // without: every condition is satisfied
	for _, c := range d.Conditions {
		st := DepNever
		if s, ok := named[c.Job]; ok {
			st = c.Eval(s)
		}
		switch {
		case d.Any && st == DepSatisfied:
			return DepSatisfied
		case !d.Any && st == DepNever:
			return DepNever
		}
		never = never && st == DepNever
		all = all && st == DepSatisfied
	}
	switch {
	case d.Any && never:
		return DepNever
	case !d.Any && all:
		return DepSatisfied
	}
	return DepWaiting
}

// Reason is the pending reason d gives its job: "" when it is satisfied
// (or nil).
func (d *Dependency) Reason(named map[JobRef]JobStatus) string {
	if d == nil {
		return ""
	}
	switch d.Status(named) {
	case DepSatisfied:
		return ""
	case DepNever:
		return reason.DependencyNeverSatisfied
	}
	return reason.Dependency
}

// Breach is a set of the JobLimits bounds a job is outside.
type Breach uint8

// The bounds of JobLimits, as Breaches names them.
const (
	BreachClosed   Breach = 1 << iota // the partition takes no job
	BreachAccount                     // none of the job's accounts is taken
	BreachMode                        // its cluster mode is not taken
	BreachSize                        // more containers than MaxSize
	BreachWalltime                    // a walltime above MaxWalltime
)

// Breaches returns the bounds of l that j is outside, 0 when l takes j.
// It is the one partition-limit rule: the eligible stage keeps a queued
// job outside them waiting PartitionLimit, and submission (package
// sched/admission) refuses one, each breach in words.
func (l *JobLimits) Breaches(j *Job) Breach {
	var b Breach
	if l.Closed {
		b |= BreachClosed
	}
	if len(l.Accounts) > 0 && !slices.ContainsFunc(j.Accounts, func(a string) bool { return slices.Contains(l.Accounts, a) }) {
		b |= BreachAccount
	}
	if len(l.Modes) > 0 {
		mode := j.Mode
		if mode == "" {
			mode = ModeSingleNode
		}
		if !slices.Contains(l.Modes, mode) {
			b |= BreachMode
		}
	}
	if l.MaxSize > 0 && len(j.Containers) > l.MaxSize {
		b |= BreachSize
	}
	if l.MaxWalltime > 0 && j.Walltime > l.MaxWalltime {
		b |= BreachWalltime
	}
	return b
}

// takes reports whether a partition with limits l takes j.
func (l *JobLimits) takes(j *Job) bool { return l.Breaches(j) == 0 }

// set reports whether l refuses any job.
func (l *JobLimits) set() bool {
	return l.Closed || l.MaxWalltime > 0 || l.MaxSize > 0 || len(l.Modes) > 0 || len(l.Accounts) > 0
}

// Ineligible is the reason j may not be considered in s now, "" when it
// may: the eligible stage's verdict on one job.
func Ineligible(s *Snapshot, j *Job) string {
	return ineligible(s, j, true)
}

// ineligible is Ineligible; limited: some partition of s has job limits.
func ineligible(s *Snapshot, j *Job, limited bool) string {
	if j.Held {
		return reason.Held
	}
	if r := j.Depends.Reason(s.Named); r != "" {
		return r
	}
	if limited {
		if p, ok := s.Partitions[j.Partition]; ok && !p.Jobs.takes(j) {
			return reason.PartitionLimit
		}
	}
	return ""
}

// eligible runs the eligible stage over s's queue: out[i] reports
// whether s.Queue[i] goes on to the other stages; plan, when not nil,
// gets the reasons of those that do not.
func eligible(s *Snapshot, plan *Plan) []bool {
	limited := false
	for _, p := range s.Partitions {
		if p.Jobs.set() {
			limited = true
			break
		}
	}
	out := make([]bool, len(s.Queue))
	for i := range s.Queue {
		j := &s.Queue[i]
		r := ineligible(s, j, limited)
		out[i] = r == ""
		if r != "" && plan != nil {
			plan.setReason(j, r)
		}
	}
	return out
}
