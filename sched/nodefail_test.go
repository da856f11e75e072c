package sched

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// TestNodeFailure: a node silent past the node timeout goes DOWN; its
// plain job ends NODE_FAIL, its requeue job goes back to the queue and
// runs elsewhere; its resources are freed; once back, its assignments no
// longer hold either job, so its nodelet stops them.
func TestNodeFailure(t *testing.T) {
	srv, c := clusterWith(t, Config{NodeTimeout: 400 * time.Millisecond})
	ctx := context.Background()
	register(t, c, "a", 4)
	plain, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 2)), User: "u", UID: 1000, GID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	rs := spec(1, "single-node", 2)
	rs.Requeue = true
	again, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(rs), User: "u", UID: 1000, GID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{plain.JobID, again.JobID} {
		waitJob(t, c, id, func(j api.Job) bool { return j.State == api.JobScheduled })
		if err := c.Report(ctx, "a", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: id, Host: "main1", State: api.ContainerRunning}}}); err != nil {
			t.Fatal(err)
		}
		waitJob(t, c, id, func(j api.Job) bool { return j.State == api.JobRunning })
	}
	// b lives (it heartbeats); a falls silent.
	register(t, c, "b", 4)
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	go func() {
		for hbCtx.Err() == nil {
			_, _ = c.Heartbeat(hbCtx, "b", api.NodeHeartbeat{})
			time.Sleep(50 * time.Millisecond)
		}
	}()

	j := waitJob(t, c, plain.JobID, func(j api.Job) bool { return j.State.Terminal() })
	if j.State != api.JobNodeFail || !j.KillWanted {
		t.Fatalf("plain job: got %s (kill wanted %v), want NODE_FAIL", j.State, j.KillWanted)
	}
	// bjob shows the container lost, not running (issue 12 item 9).
	if c := j.Containers[0]; c.State != api.ContainerFailed || !strings.Contains(c.Message, "node a failed") {
		t.Fatalf("plain job's container after NODE_FAIL: %s %q, want failed (lost: node a failed)", c.State, c.Message)
	}
	j = waitJob(t, c, again.JobID, func(j api.Job) bool { return j.State == api.JobScheduled && j.Containers[0].Node == "b" })
	if j.Requeues != 1 || j.Containers[0].State != api.ContainerAssigned {
		t.Fatalf("requeued job: requeues %d, container %s; want 1, assigned", j.Requeues, j.Containers[0].State)
	}
	v := srv.Store().Snapshot()
	if n := v.Node("a"); n.State != api.NodeDown {
		t.Fatalf("node a is %s, want DOWN", n.State)
	}
	if got := v.Allocated()["a"]; got != (state.Resources{}) {
		t.Fatalf("node a still holds %+v", got)
	}
	// A late report from a about the requeued job changes nothing.
	_ = c.Report(ctx, "a", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: again.JobID, Host: "main1", State: api.ContainerExited}}})
	if j, _, _ := c.Job(ctx, again.JobID, 0, 0); j.State != api.JobScheduled {
		t.Fatalf("a stale report moved the requeued job to %s", j.State)
	}
	// a comes back: UP, and nothing of either job in its assignments.
	if _, err := c.Heartbeat(ctx, "a", api.NodeHeartbeat{}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Store().Snapshot().Node("a"); n.State != api.NodeUp {
		t.Fatalf("node a is %s after a heartbeat, want UP", n.State)
	}
	as, err := c.Assignments(ctx, "a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(as.Assignments) != 0 {
		t.Fatalf("node a back up still has %d assignments: %+v", len(as.Assignments), as.Assignments)
	}
}

// TestPartitionRequeue: a partition with requeue = true requeues a job
// that did not ask.
func TestPartitionRequeue(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/partitions.hcl"
	writeFile(t, file, "partition \"default\" {\n  nodes = [\"*\"]\n  requeue = true\n}\n")
	_, c := clusterWith(t, Config{NodeTimeout: 300 * time.Millisecond, PartitionsFile: file})
	ctx := context.Background()
	register(t, c, "a", 4)
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 2)), User: "u", UID: 1000, GID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	j := waitJob(t, c, res.JobID, func(j api.Job) bool { return j.Requeues > 0 || j.State.Terminal() })
	if j.State != api.JobPending || j.Containers[0].Node != "" {
		t.Fatalf("got %s on %q, want PENDING unplaced", j.State, j.Containers[0].Node)
	}
}
