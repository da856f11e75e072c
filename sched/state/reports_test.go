package state

import (
	"reflect"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestReportsApplyAsAlone: a CmdReports entry (the leader's group commit
// of several nodelet reports) applies its reports in order, as that many
// report entries would: a report about an ended job is dropped alone,
// two reports of one node keep their order, and each report answers the
// jobs it started.
func TestReportsApplyAsAlone(t *testing.T) {
	up := func(id uint64, s api.ContainerState) []ContainerUpdate {
		return []ContainerUpdate{{JobID: id, Host: "main1", State: s}}
	}
	batch := []Report{
		{Node: "n1", Updates: up(1, api.ContainerPreparing)},
		{Node: "n1", Updates: up(3, api.ContainerRunning)}, // job 3 was cancelled: stale
		{Node: "n1", Updates: up(1, api.ContainerRunning)}, // after PREPARING: RUNNING
		{Node: "n1", Updates: up(2, api.ContainerExited)},
		{Node: "n1", Updates: up(2, api.ContainerRunning)}, // after EXITED: dropped
	}
	setup := func(t *testing.T) *harness {
		h := newHarness(t)
		for range 3 {
			h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
		}
		h.apply(Command{Act: Kill{Job: JobRef{ID: 3}}})
		h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}, {JobID: 2, Nodes: []string{"n1"}}}}}})
		return h
	}

	h := setup(t)
	cancelled := *h.job(3)
	res := h.apply(Command{Act: Reports{Reports: batch}})
	started, ok := res.([][]Started)
	if !ok || len(started) != len(batch) {
		t.Fatalf("a reports entry answered %#v, want one []Started per report", res)
	}
	for i, s := range started {
		want := 0
		if i == 2 {
			want = 1
		}
		if len(s) != want || want == 1 && s[0].JobID != 1 {
			t.Errorf("report %d answered started %+v, want job 1 from report 2 alone", i, s)
		}
	}
	if j := h.job(1); j.State != api.JobRunning || j.ModifyIndex != h.idx {
		t.Errorf("job 1: %s at index %d, want RUNNING at %d (PREPARING then RUNNING, in order)", j.State, j.ModifyIndex, h.idx)
	}
	if j := h.job(2); j.State != api.JobCompleted {
		t.Errorf("job 2: %s, want COMPLETED (its RUNNING came after its exit)", j.State)
	}
	if j := h.job(3); !reflect.DeepEqual(*j, cancelled) {
		t.Errorf("the stale report changed cancelled job 3:\n%+v\nwas\n%+v", *j, cancelled)
	}

	// The same reports one entry each end in the same jobs (but for the
	// indexes and times they carry).
	alone := setup(t)
	for i := range batch {
		alone.apply(Command{Act: Reports{Reports: []Report{batch[i]}}})
	}
	for id := uint64(1); id <= 3; id++ {
		a, b := *h.job(id), *alone.job(id)
		a.ModifyIndex, b.ModifyIndex = 0, 0
		a.Started, a.Ended = b.Started, b.Ended
		for i := range a.Containers {
			a.Containers[i].Ended = b.Containers[i].Ended
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("job %d batched:\n%+v\none entry per report:\n%+v", id, a, b)
		}
	}

	if _, err := New().Apply(1, Command{Act: Reports{}}); err == nil {
		t.Error("a reports entry without a report was applied")
	}
}

// TestRunAndExitInOneReport: a nodelet whose container ran and exited
// between two of its reports sends both updates in one; the job still
// gets its start time (bhist's, dependencies'), and counts as started.
func TestRunAndExitInOneReport(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})
	res := h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{
		{JobID: 1, Host: "main1", State: api.ContainerPreparing},
		{JobID: 1, Host: "main1", State: api.ContainerRunning},
		{JobID: 1, Host: "main1", State: api.ContainerExited},
	}}}}})
	j := h.job(1)
	if j.State != api.JobCompleted || j.Started.IsZero() || j.Ended.Before(j.Started) {
		t.Fatalf("job 1: %s, started %v, ended %v; want COMPLETED with a start time", j.State, j.Started, j.Ended)
	}
	if s, ok := res.([][]Started); !ok || len(s) != 1 || len(s[0]) != 1 || s[0][0].JobID != 1 {
		t.Errorf("the report answered started %#v, want job 1", res)
	}
}
