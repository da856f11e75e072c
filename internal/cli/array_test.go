package cli

import (
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
)

func arrayJobs() []api.Job {
	x, _, _ := jobspec.ParseIndices("1-100")
	return []api.Job{
		{ID: 12, Name: "sweep", State: api.JobRunning, Array: &api.Array{Indices: x, Count: 100, Next: 12,
			States: map[api.JobState]int{api.JobRunning: 2, api.JobScheduled: 1, api.JobPending: 95, api.JobCompleted: 1, api.JobFailed: 1}}},
		{ID: 14, Name: "sweep", State: api.JobRunning, ArrayID: 12, ArrayIndex: 2},
		{ID: 13, Name: "sweep", State: api.JobCompleted, ArrayID: 12, ArrayIndex: 1},
		{ID: 11, Name: "plain", State: api.JobPending},
	}
}

func TestArrayViews(t *testing.T) {
	jobs := arrayJobs()
	var ids []string
	for _, j := range jobs {
		ids = append(ids, JobID(j))
	}
	if got := strings.Join(ids, " "); got != "12[1-100] 12[2] 12[1] 11" {
		t.Errorf("JobID: %s", got)
	}
	if got := ArrayCounts(jobs[0]); got != "RUN 3 PEND 95 DONE 1 EXIT 1" {
		t.Errorf("ArrayCounts: %q", got)
	}
	if got := FoldArrays(jobs); len(got) != 2 || got[0].ID != 12 || got[1].ID != 11 {
		t.Errorf("FoldArrays: %+v", got)
	}
	var order []string
	for _, j := range SortJobs(jobs) {
		order = append(order, JobID(j))
	}
	if got := strings.Join(order, " "); got != "11 12[1-100] 12[1] 12[2]" {
		t.Errorf("SortJobs: %s", got)
	}
	lsf := LSFArrays(jobs)
	var names []string
	for _, j := range lsf {
		names = append(names, JobID(api.Job{ID: j.ID})+":"+j.Name)
	}
	if got := strings.Join(names, " "); got != "12:sweep[1-100] 12:sweep[2] 12:sweep[1] 11:plain" {
		t.Errorf("LSFArrays: %s", got)
	}
}
