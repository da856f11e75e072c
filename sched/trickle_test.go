package sched

import (
	"context"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// TestSubmitsBehindFullNodeShareAPass runs a real controller on a fixed
// clock (a pass put off behind a full node never falls due: the clock
// does not move) with one node of one cpu: a submit on the idle node is
// placed at once; one that finds it full waits for Resources; the
// submits that come one at a time after it make no pass of their own
// (the loop tells them from changes that may free room,
// state.Snapshot.RoomMarks); the running job's start and end make the
// passes, and the end's places the next job.
func TestSubmitsBehindFullNodeShareAPass(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	srv, c := clusterWith(t, Config{Clock: clock.Now, NodeTimeout: 1000 * time.Hour})
	register(t, c, "n1", 1)
	submit := func() uint64 {
		t.Helper()
		res, err := c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), UID: 1000, GID: 1000, User: "ada"})
		if err != nil {
			t.Fatal(err)
		}
		return res.JobID
	}
	passes := func() float64 {
		return metricValue(scrapeMetrics(t, srv.MetricsHandler()), "troupe_schedd_scheduling_pass_duration_seconds_count")
	}
	first := submit()
	waitJob(t, c, first, func(j api.Job) bool { return j.State == api.JobScheduled })
	second := submit()
	waitJob(t, c, second, func(j api.Job) bool { return j.Reason == api.ReasonResources })
	before := passes()
	var more []uint64
	for range 10 {
		more = append(more, submit())
	}
	runToEnd(t, c, first, 0) // its start and its end: the passes
	waitJob(t, c, second, func(j api.Job) bool { return j.State == api.JobScheduled })
	for _, id := range more {
		waitJob(t, c, id, func(j api.Job) bool { return j.Reason == api.ReasonResources || j.Reason == api.ReasonPriority })
	}
	// The start's pass, the end's (which places the second job) and the
	// one after its commit; a wake-up that came between may add one.
	if n := passes() - before; n > 4 {
		t.Errorf("%v scheduling passes for 10 submits behind a full node and a job's start and end, want at most 4", n)
	}
}
