package sched

import (
	"fmt"
	"slices"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// Job dependencies (bsub -w). A pending job with a dependency is handed
// to the core as ineligible until the dependency is satisfied: reason
// Dependency while it may still be, DependencyNeverSatisfied once it
// cannot (done(12) and job 12 FAILED); such a job waits until killed, as
// Slurm keeps it. The verdict is read from the state when the core's
// snapshot is built, so the core stays pure.

// dependencyStatus evaluates d against the jobs in v: each condition's
// status (and its job's state) and the whole's.
func dependencyStatus(v *state.Snapshot, d *api.Dependency) ([]api.Condition, api.DepStatus) {
	conds := slices.Clone(d.Conditions)
	sts := make([]api.DepStatus, len(conds))
	for i := range conds {
		c := &conds[i]
		if o := conditionJob(v, *c); o == nil {
			c.Status, c.JobState = api.DepNever, "" // only after a restore lost it
		} else {
			c.Status, c.JobState = c.Eval(o.State, !o.Started.IsZero()), o.State
		}
		sts[i] = c.Status
	}
	return conds, d.Combine(sts)
}

// conditionJob is the job (or array element) c names, nil when the state
// no longer holds it. An element without a row yet is shown as the
// array's answer for it (PENDING, HELD, or CANCELLED with the array).
func conditionJob(v *state.Snapshot, c api.Condition) *state.Job {
	o := v.Job(c.JobID)
	if o == nil || c.Index == nil {
		return o
	}
	if o.Array == nil {
		return nil
	}
	e, ok := v.ElementView(o, *c.Index)
	if !ok {
		return nil
	}
	return e
}

// dependencyElement is the row of the element c names, nil when c names
// a whole job or the element has no row.
func dependencyElement(v *state.Snapshot, c api.Condition) *state.Job {
	if c.Index == nil {
		return nil
	}
	return v.Element(c.JobID, *c.Index)
}

// dependencyReason is the pending reason j's dependency gives it, "" when
// it has none or it is satisfied.
func dependencyReason(v *state.Snapshot, j *state.Job) string {
	return dependsReason(v, j.DependsOn)
}

// dependsReason is the pending reason dependency d gives, "" when there
// is none or it is satisfied.
func dependsReason(v *state.Snapshot, d *api.Dependency) string {
	if d == nil {
		return ""
	}
	switch _, st := dependencyStatus(v, d); st {
	case api.DepSatisfied:
		return ""
	case api.DepNever:
		return api.ReasonDependencyNeverSatisfied
	}
	return api.ReasonDependency
}

// withDependency is j with its conditions' statuses filled in, for
// answers (bjob lists them).
func withDependency(v *state.Snapshot, j api.Job) api.Job {
	if a := j.Array; a != nil && j.State == api.JobPending {
		// An array's row is never queued, so no pass gives it a reason:
		// its dependency's, else its throttle's, else Priority.
		switch j.Reason = dependsReason(v, j.DependsOn); {
		case j.Reason != "":
		case a.MaxRunning > 0 && a.Started() >= a.MaxRunning:
			j.Reason = api.ReasonArrayTaskLimit
		default:
			j.Reason = api.ReasonPriority
		}
	}
	if j.DependsOn == nil {
		return j
	}
	conds, _ := dependencyStatus(v, j.DependsOn)
	j.DependsOn = &api.Dependency{Any: j.DependsOn.Any, Conditions: conds}
	return j
}

// checkDependency refuses a submission whose dependency is malformed or
// names a job schedd does not know.
func checkDependency(v *state.Snapshot, d *api.Dependency) error {
	if d == nil {
		return nil
	}
	if err := d.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	for _, c := range d.Conditions {
		o := v.Job(c.JobID)
		switch {
		case o == nil:
			return fmt.Errorf("%w: dependency %s: job %d does not exist (the last job is %d)", ErrInvalid, c, c.JobID, v.LastJobID())
		case c.Index != nil && o.Array == nil:
			return fmt.Errorf("%w: dependency %s: job %d is not a job array", ErrInvalid, c, c.JobID)
		case c.Index != nil && !o.Array.Indices.Contains(*c.Index):
			return fmt.Errorf("%w: dependency %s: array %d has no element %d (its indices: %s)", ErrInvalid, c, c.JobID, *c.Index, o.Array.Indices)
		}
	}
	return nil
}
