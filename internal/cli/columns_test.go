package cli

import (
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestSuspendedFilter: Slurm's S (SUSPENDED) and LSF's SSUSP pick the
// running jobs whose containers are frozen, not the SCHEDULED ones;
// RUNNING still picks a suspended job.
func TestSuspendedFilter(t *testing.T) {
	for _, name := range []string{"S", "s", "SUSPENDED", "SSUSP"} {
		got, err := ParseStates(name)
		if err != nil || len(got) != 1 || got[0] != JobSuspended {
			t.Errorf("ParseStates(%q) = %v, %v; want [%s]", name, got, err, JobSuspended)
		}
	}
	frozen := api.Job{ID: 1, State: api.JobRunning, Suspended: &api.Suspension{}}
	running := api.Job{ID: 2, State: api.JobRunning}
	scheduled := api.Job{ID: 3, State: api.JobScheduled}
	for _, c := range []struct {
		states []api.JobState
		job    api.Job
		want   bool
	}{
		{[]api.JobState{JobSuspended}, frozen, true},
		{[]api.JobState{JobSuspended}, running, false},
		{[]api.JobState{JobSuspended}, scheduled, false},
		{[]api.JobState{api.JobRunning}, frozen, true},
		{[]api.JobState{api.JobScheduled}, frozen, false},
	} {
		if got := (JobFilter{States: c.states}).Match(c.job); got != c.want {
			t.Errorf("states %v, job %d (%s, suspended %t): match %t, want %t", c.states, c.job.ID, c.job.State, c.job.Suspended != nil, got, c.want)
		}
	}
}
