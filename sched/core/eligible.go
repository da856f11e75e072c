package core

import (
	"slices"

	"github.com/troupe-hpc/troupe/internal/depend"
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
// (Snapshot.Named), each condition by package depend's rule, so schedd
// and bsim decide it alike.

// JobRef names a job, or with Element one element of job array ID.
type JobRef struct {
	ID      uint64
	Index   int
	Element bool
}

// JobStatus is what a dependency may ask of the job it names (package
// depend's, which holds the dependency vocabulary).
type JobStatus = depend.JobStatus

// Condition is one term of a dependency: Kind of job Job.
type Condition struct {
	Kind depend.Kind
	Job  JobRef
}

// Dependency is a job's dependency: every condition holds, or with Any
// one of them does.
type Dependency struct {
	Any        bool
	Conditions []Condition
}

// Eval is c's status given the status of the job it names, by
// depend's rule.
func (c Condition) Eval(s JobStatus) depend.Status { return c.Kind.Eval(s) }

// Status is d's status given the jobs it names (named); a job missing
// from named is gone, so its condition can never be met.
func (d *Dependency) Status(named map[JobRef]JobStatus) depend.Status {
	never := true // with Any: every condition is never
	all := true   // without: every condition is satisfied
	for _, c := range d.Conditions {
		st := depend.Never
		if s, ok := named[c.Job]; ok {
			st = c.Eval(s)
		}
		switch {
		case d.Any && st == depend.Satisfied:
			return depend.Satisfied
		case !d.Any && st == depend.Never:
			return depend.Never
		}
		never = never && st == depend.Never
		all = all && st == depend.Satisfied
	}
	switch {
	case d.Any && never:
		return depend.Never
	case !d.Any && all:
		return depend.Satisfied
	}
	return depend.Waiting
}

// Reason is the pending reason d gives its job: "" when it is satisfied
// (or nil).
func (d *Dependency) Reason(named map[JobRef]JobStatus) string {
	if d == nil {
		return ""
	}
	switch d.Status(named) {
	case depend.Satisfied:
		return ""
	case depend.Never:
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
