package sched

import (
	"cmp"
	"slices"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/reason"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/state"
)

// Job dependencies (bsub -w). The core decides a pending job's
// dependency (core.Dependency, its eligible stage): reason Dependency
// while it may still be met, DependencyNeverSatisfied once it cannot
// (done(12) and job 12 FAILED); such a job waits until killed, as Slurm
// keeps it. Here the state is read for it: the dependency in the core's
// terms and the state of every job it names (core.Snapshot.Named). The
// answers (bjob's conditions, an array row's reason) use the core's
// verdict too.

// coreDependency is d in the core's terms; what the state holds of each
// job d names goes into named (a job it no longer holds is left out:
// the core takes it as gone).
func coreDependency(v *state.Snapshot, d *api.Dependency, named map[core.JobRef]core.JobStatus) *core.Dependency {
	cd := &core.Dependency{Any: d.Any, Conditions: make([]core.Condition, len(d.Conditions))}
	for i, c := range d.Conditions {
		ref := core.JobRef{ID: c.JobID}
		if c.Index != nil {
			ref.Index, ref.Element = *c.Index, true
		}
		cd.Conditions[i] = core.Condition{Kind: c.Kind, Job: ref}
		if _, seen := named[ref]; seen {
			continue
		}
		if o := conditionJob(v, c); o != nil {
			named[ref] = jobStatus(o)
		}
	}
	return cd
}

// jobStatus is what a dependency may ask of o.
func jobStatus(o *state.Job) core.JobStatus {
	return core.JobStatus{Started: !o.Started.IsZero(), Ended: o.State.Terminal(), Completed: o.State == api.JobCompleted}
}

// dependencyStatus evaluates d against the jobs in v, as the core does:
// each condition's status (and its job's state) and the whole's.
func dependencyStatus(v *state.Snapshot, d *api.Dependency) ([]api.Condition, api.DepStatus) {
	named := map[core.JobRef]core.JobStatus{}
	cd := coreDependency(v, d, named)
	conds := slices.Clone(d.Conditions)
	for i := range conds {
		c := &conds[i]
		c.Status, c.JobState = api.DepNever, "" // only after a restore lost it
		if o := conditionJob(v, *c); o != nil {
			c.Status, c.JobState = api.DepStatus(cd.Conditions[i].Eval(named[cd.Conditions[i].Job])), o.State
		}
	}
	return conds, api.DepStatus(cd.Status(named))
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

// dependsReason is the pending reason dependency d gives, "" when there
// is none or it is satisfied.
func dependsReason(v *state.Snapshot, d *api.Dependency) string {
	if d == nil {
		return ""
	}
	named := map[core.JobRef]core.JobStatus{}
	return coreDependency(v, d, named).Reason(named)
}

// withDependency is j with its conditions' statuses filled in, for
// answers (bjob lists them).
func withDependency(v *state.Snapshot, j api.Job) api.Job {
	if a := j.Array; a != nil && j.State == api.JobPending {
		// An array's row is never queued, so no pass gives it a reason:
		// its dependency's as the core judges it, else the core's for a
		// job that waits (its throttle's, else Priority).
		j.Reason = cmp.Or(dependsReason(v, j.DependsOn),
			reason.Waiting(false, false, a.MaxRunning > 0 && a.Started() >= a.MaxRunning))
	}
	if j.DependsOn == nil {
		return j
	}
	conds, _ := dependencyStatus(v, j.DependsOn)
	j.DependsOn = &api.Dependency{Any: j.DependsOn.Any, Conditions: conds}
	return j
}
