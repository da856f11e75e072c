package nodelet

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/nodelet/report"
)

// TestReconcileWhileStoppingReportsNothing: an assignments answer that
// reaches a detaching nodelet after its task left the container running
// (the task gone from running, not finished) changes nothing; a live
// nodelet reports such a container lost. The detaching nodelet used to
// report it failed, ending a job whose container went on running.
func TestReconcileWhileStoppingReportsNothing(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &agent{log: log, running: map[key]*task{}, finished: map[key]bool{}}
	a.rep = report.New(func(context.Context, api.ContainerReport) error { return nil }, log, true)
	job := api.AssignedJob{ID: 1, Containers: []api.Container{
		{Container: jobspec.Container{Host: "main1", Role: jobspec.RoleMain, Idx: 1}, State: api.ContainerRunning},
	}}
	as := api.Assignments{Assignments: []api.Assignment{{Job: job, Hosts: []string{"main1"}}}}

	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrDetach)
	a.reconcile(ctx, as)
	if n := a.rep.Pending(); n != 0 {
		t.Fatalf("a detaching nodelet queued %d reports: %+v", n, a.rep.Queued())
	}
	a.reconcile(context.Background(), as)
	if n := a.rep.Pending(); n != 1 || a.rep.Queued()[0].State != api.ContainerFailed {
		t.Fatalf("a live nodelet queued %+v, want the container reported failed (lost)", a.rep.Queued())
	}
}
