package sched

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// TestJobStageSeconds runs a two-container job through a real controller
// on a fixed clock: submitted with no node (queued 1s until one
// registers and the loop places it), then the node's reports one by one
// (preparing 2s later, running 3s later, main1 exited 4s later, sub1
// killed 5s later). Each stage of troupe_job_stage_seconds is observed
// once with its own duration, and a report repeated observes nothing.
func TestJobStageSeconds(t *testing.T) {
	clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	advance := clock.Add
	srv, c := clusterWith(t, Config{Clock: clock.Now, NodeTimeout: 1000 * time.Hour})
	ctx := context.Background()

	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(2, jobspec.ModeSingleNode, 1)), UID: 1000, GID: 1000, User: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	advance(time.Second)
	register(t, c, "n1", 4)
	j := waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	// The loop observes the placement just after it commits: wait for it,
	// so that the next report finds the job placed.
	count := func(stage string) float64 {
		return metricValue(scrapeMetrics(t, srv.MetricsHandler()), fmt.Sprintf(`troupe_job_stage_seconds_count{stage=%q}`, stage))
	}
	eventually.Equal(t, 10*time.Second, "queued stages observed once the job was placed", 1, func() float64 { return count(stageQueued) })
	report := func(d time.Duration, states ...api.ContainerState) {
		t.Helper()
		advance(d)
		var up api.ContainerReport
		for i, st := range states {
			if st != "" {
				up.Updates = append(up.Updates, api.ContainerUpdate{JobID: j.ID, Host: j.Containers[i].Host, State: st})
			}
		}
		if err := c.Report(ctx, "n1", up); err != nil {
			t.Fatal(err)
		}
	}
	report(2*time.Second, api.ContainerPreparing, "")
	report(0, "", api.ContainerPreparing)
	report(3*time.Second, api.ContainerRunning, api.ContainerRunning)
	report(0, api.ContainerRunning, api.ContainerRunning) // again: nothing passes
	report(4*time.Second, api.ContainerExited, "")
	report(5*time.Second, "", api.ContainerKilled)
	if j := waitJob(t, c, j.ID, func(j api.Job) bool { return j.State.Terminal() }); j.State != api.JobCompleted {
		t.Fatalf("job ended %s (%s)", j.State, j.Reason)
	}

	body := scrapeMetrics(t, srv.MetricsHandler())
	for stage, want := range map[string]float64{stageQueued: 1, stageDispatch: 2, stagePreparing: 3, stageRunning: 4, stageEnding: 5} {
		if n := metricValue(body, fmt.Sprintf(`troupe_job_stage_seconds_count{stage=%q}`, stage)); n != 1 {
			t.Errorf("stage %s observed %v times, want once", stage, n)
		}
		if s := metricValue(body, fmt.Sprintf(`troupe_job_stage_seconds_sum{stage=%q}`, stage)); s != want {
			t.Errorf("stage %s took %v s, want %v", stage, s, want)
		}
	}
	// The slot is placed → main1's end: dispatch + preparing + running.
	if n, s := metricValue(body, "troupe_job_slot_seconds_count"), metricValue(body, "troupe_job_slot_seconds_sum"); n != 1 || s != 2+3+4 {
		t.Errorf("troupe_job_slot_seconds: %v observations summing to %v s, want 1 of 9 s", n, s)
	}
	srv.metrics.stages.mu.Lock()
	left := len(srv.metrics.stages.jobs)
	srv.metrics.stages.mu.Unlock()
	if left != 0 {
		t.Errorf("%d jobs still timed after the job ended", left)
	}
}

// TestJobStageSecondsTogether: a `true` job whose running and exited
// updates come in one report passes preparing, running and exited at
// once; the skipped stages are observed as 0, each job still once.
func TestJobStageSecondsTogether(t *testing.T) {
	srv, c := clusterWith(t, Config{})
	ctx := context.Background()
	register(t, c, "n1", 4)
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), UID: 1000, GID: 1000, User: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	count := func(stage string) float64 {
		return metricValue(scrapeMetrics(t, srv.MetricsHandler()), fmt.Sprintf(`troupe_job_stage_seconds_count{stage=%q}`, stage))
	}
	eventually.Equal(t, 10*time.Second, "queued stages observed once the job was placed", 1, func() float64 { return count(stageQueued) })
	up := api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: j.ID, Host: j.Containers[0].Host, State: api.ContainerExited}}}
	if err := c.Report(ctx, "n1", up); err != nil {
		t.Fatal(err)
	}
	body := scrapeMetrics(t, srv.MetricsHandler())
	for _, stage := range stageNames {
		if n := metricValue(body, fmt.Sprintf(`troupe_job_stage_seconds_count{stage=%q}`, stage)); n != 1 {
			t.Errorf("stage %s observed %v times, want once", stage, n)
		}
	}
	for _, stage := range []string{stagePreparing, stageRunning, stageEnding} {
		if s := metricValue(body, fmt.Sprintf(`troupe_job_stage_seconds_sum{stage=%q}`, stage)); s != 0 {
			t.Errorf("stage %s took %v s, want 0 (passed in the same report)", stage, s)
		}
	}
}

// TestJobStageSecondsStarting: a node that dropped a container's
// preparing update (its running update overtook it) sends the start's
// length as Starting; the preparing stage is that long and dispatch the
// rest. A Starting longer than the time since the placement (a node's
// clock running fast) leaves dispatch at 0 rather than below it.
func TestJobStageSecondsStarting(t *testing.T) {
	clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	advance := clock.Add
	srv, c := clusterWith(t, Config{Clock: clock.Now, NodeTimeout: 1000 * time.Hour})
	ctx := context.Background()
	register(t, c, "n1", 4)
	sum := func(stage string) float64 {
		return metricValue(scrapeMetrics(t, srv.MetricsHandler()), fmt.Sprintf(`troupe_job_stage_seconds_sum{stage=%q}`, stage))
	}
	for i, tc := range []struct {
		starting                    time.Duration
		wantDispatch, wantPreparing float64 // sums so far
	}{
		{starting: 3 * time.Second, wantDispatch: 2, wantPreparing: 3},
		{starting: 9 * time.Second, wantDispatch: 2 + 0, wantPreparing: 3 + 5},
	} {
		res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), UID: 1000, GID: 1000, User: "ada"})
		if err != nil {
			t.Fatal(err)
		}
		j := waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
		eventually.Equal(t, 10*time.Second, fmt.Sprintf("job %d's queued stage observed once it was placed", j.ID), float64(i+1), func() float64 {
			return metricValue(scrapeMetrics(t, srv.MetricsHandler()), `troupe_job_stage_seconds_count{stage="queued"}`)
		})
		advance(5 * time.Second)
		up := api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: j.ID, Host: j.Containers[0].Host,
			State: api.ContainerRunning, Starting: tc.starting}}}
		if err := c.Report(ctx, "n1", up); err != nil {
			t.Fatal(err)
		}
		if got := sum(stageDispatch); got != tc.wantDispatch {
			t.Errorf("Starting %v: dispatch stages sum to %v s, want %v", tc.starting, got, tc.wantDispatch)
		}
		if got := sum(stagePreparing); got != tc.wantPreparing {
			t.Errorf("Starting %v: preparing stages sum to %v s, want %v", tc.starting, got, tc.wantPreparing)
		}
	}
}

// TestStageClockForgets: the jobs of a plan that did not commit are not
// timed, and a job that left the pipeline other than by a report (killed
// while queued) is pruned, so the map holds only jobs in flight.
func TestStageClockForgets(t *testing.T) {
	srv, c := clusterWith(t, Config{})
	ctx := context.Background()
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), UID: 1000, GID: 1000, User: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	sc := newStageClock()
	plan := &state.Plan{Placements: []state.Placement{{JobID: res.JobID, Nodes: []string{"n1"}}}}
	sc.placing(srv.st.Snapshot(), plan, time.Now())
	sc.placed(srv.st.Snapshot(), plan, false)
	if len(sc.jobs) != 0 {
		t.Fatalf("a plan that did not commit left %d jobs timed", len(sc.jobs))
	}
	sc.placing(srv.st.Snapshot(), plan, time.Now())
	sc.placed(srv.st.Snapshot(), plan, true)
	if _, err := c.Kill(ctx, res.JobID); err != nil {
		t.Fatal(err)
	}
	sc.prune(srv.st.Snapshot())
	if len(sc.jobs) != 0 {
		t.Fatalf("a killed job is still timed after a prune")
	}
}
