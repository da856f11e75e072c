package api

import "time"

// Suspension is a running job's gang suspension: every container of its
// session frozen at once through the cgroup freezer (LSF's SSUSP,
// Slurm's S). While it lasts the job's CPUs and GPUs are free for other
// jobs and its memory stays held, and its walltime does not run.
type Suspension struct {
	// Since is when it was suspended.
	Since time.Time `json:"since"`
	// Reason says why: an admin's request, or the job that preempted it.
	Reason string `json:"reason,omitempty"`
	// By is who asked (an admin's name, or "schedd").
	By string `json:"by,omitempty"`
	// ResumeWanted: a resume was asked for; the job resumes as soon as
	// its CPUs and GPUs on its nodes are free again.
	ResumeWanted bool `json:"resume_wanted,omitempty"`
}

// Stopping is where a running job's walltime ends: Started plus
// Walltime plus the time it has spent suspended (suspended time does not
// count against the limit, as Slurm's); zero without a walltime or
// start, or while it is suspended (its end is not known then).
func Stopping(started time.Time, walltime, suspendedFor time.Duration, s *Suspension) time.Time {
	if started.IsZero() || walltime <= 0 || s != nil {
		return time.Time{}
	}
	return started.Add(walltime + suspendedFor)
}
