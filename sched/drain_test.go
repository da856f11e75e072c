package sched

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

func nodeState(t *testing.T, c *client.Client, name string) api.Node {
	t.Helper()
	l, err := c.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no node %s", name)
	return api.Node{}
}

// A drained node takes nothing new; its running job goes on (DRAINING),
// and once that ends it is DRAINED. A re-registration keeps the drain;
// resume puts the node back in service.
func TestDrain(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	register(t, c, "n1", 4)
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })

	list, err := c.Drain(ctx, api.NodeDrain{Nodes: []string{"n1"}, Reason: "DIMM errors"})
	if err != nil || len(list.Nodes) != 1 || list.Nodes[0].State != api.NodeDraining || list.Nodes[0].Reason != "DIMM errors" {
		t.Fatalf("drain answered %+v, %v", list, err)
	}
	// n1 has room for 3 more cpus, but the new job waits; its job goes on.
	next, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, next.JobID, func(j api.Job) bool { return j.State == api.JobPending && j.Reason == api.ReasonResources })
	finish(t, c, res.JobID, 0)
	if n := nodeState(t, c, "n1"); n.State != api.NodeDrained || !n.Drain || n.Reason != "DIMM errors" || len(n.Partitions) != 1 || n.Partitions[0] != DefaultPartition {
		t.Fatalf("drained and empty n1: %+v", n)
	}

	// The nodelet restarts and registers again: still drained, still nothing.
	register(t, c, "n1", 4)
	if n := nodeState(t, c, "n1"); n.State != api.NodeDrained {
		t.Fatalf("after re-registration n1 is %s", n.State)
	}
	if j, _, _ := c.Job(ctx, next.JobID, 0, 0); j.State != api.JobPending {
		t.Fatalf("job %d is %s on a drained node", j.ID, j.State)
	}
	// A second node takes it.
	register(t, c, "n2", 4)
	if j := waitJob(t, c, next.JobID, func(j api.Job) bool { return j.State == api.JobScheduled }); j.Containers[0].Node != "n2" {
		t.Fatalf("job placed on %s", j.Containers[0].Node)
	}

	if _, err := c.Drain(ctx, api.NodeDrain{Nodes: []string{"n1"}, Resume: true}); err != nil {
		t.Fatal(err)
	}
	if n := nodeState(t, c, "n1"); n.State != api.NodeUp || n.Drain || n.Reason != "" {
		t.Fatalf("resumed n1: %+v", n)
	}
	third, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 4))})
	if err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, c, third.JobID, func(j api.Job) bool { return j.State == api.JobScheduled }); j.Containers[0].Node != "n1" {
		t.Fatalf("4-cpu job placed on %s, want the resumed n1", j.Containers[0].Node)
	}
}

func TestDrainRefusals(t *testing.T) {
	srv, c := cluster(t)
	ctx := context.Background()
	register(t, c, "n1", 4)
	for _, tt := range []struct {
		name string
		d    api.NodeDrain
		want string
	}{
		{"unknown node", api.NodeDrain{Nodes: []string{"n1", "n9"}, Reason: "x"}, "unknown node n9; known nodes: n1"},
		{"no reason", api.NodeDrain{Nodes: []string{"n1"}}, "draining needs a reason"},
		{"no nodes", api.NodeDrain{Reason: "x"}, "name at least one node"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Drain(ctx, tt.d)
			var ae *client.APIError
			if !asAPI(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want 400 with %q", err, tt.want)
			}
		})
	}
	if n := nodeState(t, c, "n1"); n.Drain {
		t.Fatal("a refused drain drained n1")
	}

	// Only admins drain; the admin's name is recorded.
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	root := auth.Identity{UID: 0, GID: 0, User: "root", Admin: true}
	body := api.NodeDrain{Nodes: []string{"n1"}, Reason: "mine now"}
	if code, b := as(srv, alice, "POST", "/v1/nodes/drain", body); code != http.StatusForbidden || !strings.Contains(string(b), "administrators") {
		t.Fatalf("alice drains: %d %s", code, b)
	}
	if n := nodeState(t, c, "n1"); n.Drain {
		t.Fatal("alice's refused drain drained n1")
	}
	if code, b := as(srv, root, "POST", "/v1/nodes/drain", body); code != http.StatusOK {
		t.Fatalf("root drains: %d %s", code, b)
	}
	if n := nodeState(t, c, "n1"); !n.Drain || n.DrainedBy != "root" || n.DrainedAt.IsZero() {
		t.Fatalf("root's drain: %+v", n)
	}
}

// The drain is in the raft log: a restarted schedd still has it.
func TestDrainSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *Server {
		srv, err := Open(ctx, Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	srv := open()
	reg := api.NodeRegister{Name: "n1", Addr: "127.0.0.1", Capacity: api.Resources{CPUMilli: 4000, Memory: 4 << 30}, Runtime: "process"}
	if _, err := srv.Register(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Drain(ctx, api.NodeDrain{Nodes: []string{"n1"}, Reason: "rack move"}, "root"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv = open()
	defer srv.Close()
	if n := srv.NodeView(srv.Store().Snapshot()); len(n) != 1 || n[0].State != api.NodeDrained || n[0].Reason != "rack move" || n[0].DrainedBy != "root" {
		t.Fatalf("after restart: %+v", n)
	}
	if open := srv.nodes.open(srv.Store().Snapshot()); len(open) != 0 {
		t.Fatalf("the scheduler sees %d nodes, want none", len(open))
	}
}
