package cli_test

import (
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
)

// TestHistoryFromRequeuedJob: bhist -a shows an unfinished job that a
// node failure requeued as its current run: its wait counts from the
// requeue, and its timeline begins with it, as the ended runs' records
// do; a job never requeued begins with its submission.
func TestHistoryFromRequeuedJob(t *testing.T) {
	sub := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	requeued := sub.Add(time.Minute)
	j := api.Job{ID: 7, Name: "sim", User: "nobody", Partition: "batch", State: api.JobRunning, Submitted: sub,
		Started: requeued.Add(10 * time.Second), Requeues: 1,
		Runs: []api.JobRun{{Started: sub.Add(time.Second), Ended: requeued, Reason: "requeued: node n1 failed"}}}
	now := requeued.Add(time.Minute)
	h := cli.HistoryFromJob(j, now)
	if h.Wait != 10*time.Second || h.Run != 50*time.Second || h.Requeues != 1 {
		t.Errorf("run 2 waited %v, ran %v (run %d); want 10s from the requeue, 50s so far", h.Wait, h.Run, h.Requeues+1)
	}
	if len(h.Events) != 2 || h.Events[0].Event != api.EventRequeued || !h.Events[0].Time.Equal(requeued) ||
		h.Events[0].Detail != "run 2: requeued: node n1 failed" || h.Events[1].Event != api.EventStarted {
		t.Errorf("run 2's timeline %+v; want requeued at %v (run 2: why), then started", h.Events, requeued)
	}

	j.Requeues, j.Runs, j.Started = 0, nil, sub.Add(5*time.Second)
	h = cli.HistoryFromJob(j, now)
	if h.Wait != 5*time.Second || len(h.Events) != 2 || h.Events[0].Event != api.EventSubmitted {
		t.Errorf("a job never requeued: wait %v, timeline %+v; want 5s from its submission, submitted first", h.Wait, h.Events)
	}
}
