package sched

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// TestDependencyJobStates: what a condition says of the job it names in
// each state, as the core decides it from jobStatus (the table of bsub
// -w; the kinds and statuses are the same strings in api and core).
func TestDependencyJobStates(t *testing.T) {
	for _, r := range []struct {
		kind    api.DepKind
		state   api.JobState
		started bool
		want    api.DepStatus
	}{
		{api.DepDone, api.JobRunning, true, api.DepWaiting},
		{api.DepDone, api.JobCompleted, true, api.DepSatisfied},
		{api.DepDone, api.JobFailed, true, api.DepNever},
		{api.DepDone, api.JobCancelled, false, api.DepNever},
		{api.DepExit, api.JobCompleted, true, api.DepNever},
		{api.DepExit, api.JobTimeout, true, api.DepSatisfied},
		{api.DepExit, api.JobPending, false, api.DepWaiting},
		{api.DepEnded, api.JobNodeFail, true, api.DepSatisfied},
		{api.DepEnded, api.JobHeld, false, api.DepWaiting},
		{api.DepStarted, api.JobPending, false, api.DepWaiting},
		{api.DepStarted, api.JobRunning, true, api.DepSatisfied},
		{api.DepStarted, api.JobCancelled, false, api.DepSatisfied},
	} {
		o := &state.Job{State: r.state}
		if r.started {
			o.Started = time.Unix(1, 0)
		}
		if got := r.kind.Eval(jobStatus(o)); got != r.want {
			t.Errorf("%s(1) with the job %s (started %v): %s, want %s", r.kind, r.state, r.started, got, r.want)
		}
	}
}

// finish plays the nodelet of a placed 1-container job: main1 runs, then
// exits with code.
func finish(t *testing.T, c *client.Client, id uint64, code int) {
	t.Helper()
	ctx := context.Background()
	j := waitJob(t, c, id, func(j api.Job) bool { return j.State == api.JobScheduled })
	node := j.Containers[0].Node
	for _, u := range []api.ContainerUpdate{
		{JobID: id, Host: "main1", State: api.ContainerRunning},
		{JobID: id, Host: "main1", State: api.ContainerExited, ExitCode: code},
	} {
		if err := c.Report(ctx, node, api.ContainerReport{Updates: []api.ContainerUpdate{u}}); err != nil {
			t.Fatal(err)
		}
	}
	waitJob(t, c, id, func(j api.Job) bool { return j.State.Terminal() })
}

func dependent(t *testing.T, c *client.Client, expr string) uint64 {
	t.Helper()
	d, err := api.ParseDependency(expr)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), DependsOn: d})
	if err != nil {
		t.Fatalf("submit -w %s: %v", expr, err)
	}
	return res.JobID
}

// B after A: B waits with reason Dependency while A runs, though there is
// room, and is placed only once A has ended.
func TestDependencyChain(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	register(t, c, "n1", 8)
	a, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))})
	if err != nil {
		t.Fatal(err)
	}
	b := dependent(t, c, "done(1)")
	s := dependent(t, c, "afterany:1") // Slurm syntax, ended(1)
	waitJob(t, c, a.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	jb := waitJob(t, c, b, func(j api.Job) bool { return j.State == api.JobPending && j.Reason == api.ReasonDependency })
	if d := jb.DependsOn; d == nil || d.String() != "done(1)" || d.Conditions[0].Status != api.DepWaiting || d.Conditions[0].JobState != api.JobScheduled {
		t.Fatalf("job %d's dependency as answered: %+v", b, d)
	}
	// A later pass, room on n1, still nothing for B.
	if _, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, 4, func(j api.Job) bool { return j.State == api.JobScheduled })
	if j, _, _ := c.Job(ctx, b, 0, 0); j.State != api.JobPending {
		t.Fatalf("job %d is %s while job 1 still runs", b, j.State)
	}

	finish(t, c, a.JobID, 0)
	jb = waitJob(t, c, b, func(j api.Job) bool { return j.State == api.JobScheduled })
	if jb.DependsOn.Conditions[0].Status != api.DepSatisfied {
		t.Errorf("done(1) after job 1 COMPLETED: %+v", jb.DependsOn.Conditions[0])
	}
	waitJob(t, c, s, func(j api.Job) bool { return j.State == api.JobScheduled })
}

// done(A) when A FAILED can never be satisfied: the job stays PENDING
// (DependencyNeverSatisfied) until bkill; exit(A) starts instead.
func TestDependencyNeverSatisfied(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	register(t, c, "n1", 8)
	if _, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))}); err != nil {
		t.Fatal(err)
	}
	ok := dependent(t, c, "done(1)")
	notok := dependent(t, c, "afternotok:1")
	either := dependent(t, c, "done(1) || exit(1)")
	finish(t, c, 1, 3)

	j := waitJob(t, c, ok, func(j api.Job) bool { return j.Reason == api.ReasonDependencyNeverSatisfied })
	if j.State != api.JobPending || j.DependsOn.Conditions[0].Status != api.DepNever {
		t.Fatalf("job %d: %s, %+v", ok, j.State, j.DependsOn)
	}
	waitJob(t, c, notok, func(j api.Job) bool { return j.State == api.JobScheduled })
	waitJob(t, c, either, func(j api.Job) bool { return j.State == api.JobScheduled })
	if j, _, _ := c.Job(ctx, ok, 0, 0); j.State != api.JobPending {
		t.Fatalf("job %d with a never-satisfied dependency is %s", ok, j.State)
	}
	if j, err := c.Kill(ctx, ok); err != nil || j.State != api.JobCancelled {
		t.Fatalf("bkill %d: %v, %s", ok, err, j.State)
	}
}

func TestDependencyRefusals(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	register(t, c, "n1", 8)
	if _, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		dep  *api.Dependency
		want string
	}{
		{"unknown job", &api.Dependency{Conditions: []api.Condition{{Kind: api.DepDone, JobID: 1}, {Kind: api.DepEnded, JobID: 99}}},
			"dependency ended(99): job 99 does not exist (the last job is 1)"},
		{"no conditions", &api.Dependency{}, "dependency without conditions"},
		{"bad kind", &api.Dependency{Conditions: []api.Condition{{Kind: "afterok", JobID: 1}}}, `condition "afterok"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), DependsOn: tt.dep})
			var ae *client.APIError
			if !asAPI(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want 400 with %q", err, tt.want)
			}
		})
	}
	if l, _ := c.Jobs(ctx, 0, 0); len(l.Jobs) != 1 {
		t.Errorf("refused submissions left %d jobs", len(l.Jobs))
	}
}
