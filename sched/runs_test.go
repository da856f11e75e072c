package sched

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// A job requeued after a node failure has two runs in history, each
// with its own nodes, times and state: the first in the store as soon as
// the requeue ended it (the job still queued), both once the job has
// ended and left raft; bacct counts one job and sums both runs.
func TestRequeuedRunsInHistory(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	srv, c := exportServer(t, t.TempDir(), clock, Config{KeepEnded: time.Minute})
	ctx := context.Background()
	register(t, c, "n1", 4)
	register(t, c, "n2", 4)
	sp := spec(1, "single-node", 1)
	sp.Requeue = true
	r, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(sp)})
	if err != nil {
		t.Fatal(err)
	}
	id := r.JobID
	apply := func(cmd state.Command) {
		t.Helper()
		if _, err := srv.apply(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	report := func(node string, run int, st api.ContainerState, at time.Time) {
		t.Helper()
		if err := srv.Report(ctx, node, api.ContainerReport{Updates: []api.ContainerUpdate{
			{JobID: id, Host: "main1", Requeues: run, State: st, At: at}}}); err != nil {
			t.Fatal(err)
		}
	}
	apply(state.Command{Act: state.Place{Plan: &state.Plan{Placements: []state.Placement{{JobID: id, Nodes: []string{"n1"}}}}}})
	report("n1", 0, api.ContainerRunning, time.Time{})
	clock.Add(10 * time.Second)
	apply(state.Command{Act: state.NodesDown{Down: &state.NodeDown{Nodes: []string{"n1"}}}})
	if _, err := srv.ExportEnded(ctx); err != nil {
		t.Fatal(err)
	}
	if got := history(t, c, url.Values{"id": {"1"}}); len(got) != 1 || got[0].State != api.JobRequeued || got[0].Requeues != 0 ||
		!slices.Equal(got[0].Nodes, []string{"n1"}) || got[0].Run != 10*time.Second {
		t.Fatalf("history while requeued: %+v; want run 0 REQUEUED on n1, 10s", got)
	}

	clock.Add(5 * time.Second)
	apply(state.Command{Act: state.Place{Plan: &state.Plan{Placements: []state.Placement{{JobID: id, Nodes: []string{"n2"}}}}}})
	report("n2", 1, api.ContainerRunning, time.Time{})
	started := clock.Now()
	clock.Add(20 * time.Second)
	// It exited 3s after its start; the report comes 17s later.
	report("n2", 1, api.ContainerExited, started.Add(3*time.Second))
	clock.Add(time.Minute)
	if n, err := srv.ExportEnded(ctx); err != nil || n != 1 {
		t.Fatalf("purged %d, %v; want the job", n, err)
	}
	if srv.Store().Snapshot().Job(id) != nil {
		t.Fatal("the ended job is still in raft")
	}
	got := history(t, c, url.Values{"id": {"1"}})
	if len(got) != 2 {
		t.Fatalf("history of the ended job: %d records, want 2 runs: %+v", len(got), got)
	}
	r0, r1 := got[0], got[1]
	if r0.Requeues != 0 || r0.State != api.JobRequeued || !slices.Equal(r0.Nodes, []string{"n1"}) || r0.Run != 10*time.Second ||
		r0.Events[len(r0.Events)-1].Event != api.EventRequeued {
		t.Errorf("run 0: %+v", r0)
	}
	if r1.Requeues != 1 || r1.State != api.JobCompleted || !slices.Equal(r1.Nodes, []string{"n2"}) || r1.Run != 3*time.Second ||
		r1.Wait != 5*time.Second || r1.Events[0].Event != api.EventRequeued || !r1.Started.Equal(started) {
		t.Errorf("run 1: %+v; want COMPLETED on n2, waited 5s since the requeue, ran 3s", r1)
	}
	sum, err := srv.AccountingSummary(ctx, api.HistoryFilter{}, "user")
	if err != nil || sum.Total.Jobs != 1 || sum.Total.Completed != 1 || sum.Total.Run != 13*time.Second {
		t.Errorf("bacct: %+v, %v; want 1 job, completed, 13s run (both runs)", sum.Total, err)
	}
}
