package sched

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// A heartbeat's failing health verdict drains the node by its health
// check (shown with the check's first line, by "healthcheck"; the
// scheduler leaves the node out); a passing one resumes it, but never
// lifts an admin's drain, made before or while the check failed.
func TestHeartbeatHealth(t *testing.T) {
	ctx := context.Background()
	srv, err := Open(ctx, Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, n := range []string{"n1", "n2"} {
		reg := api.NodeRegister{Name: n, Addr: "127.0.0.1", Capacity: api.Resources{CPUMilli: 4000, Memory: 4 << 30}, Runtime: "process"}
		if _, err := srv.Register(ctx, reg); err != nil {
			t.Fatal(err)
		}
	}
	beat := func(h api.NodeHealth) {
		t.Helper()
		if _, err := srv.NodeHeartbeat(ctx, "n1", api.NodeHeartbeat{Health: &h}); err != nil {
			t.Fatal(err)
		}
	}
	view := func() api.Node {
		t.Helper()
		for _, n := range srv.NodeView(srv.Store().Snapshot()) {
			if n.Name == "n1" {
				return n
			}
		}
		t.Fatal("no n1")
		return api.Node{}
	}
	open := func() bool {
		for _, n := range srv.nodes.open(srv.Store().Snapshot()) {
			if n.Name == "n1" {
				return true
			}
		}
		return false
	}
	why := "ERROR: nhc: Health check failed: check_fs_mount: /scratch not mounted"
	beat(api.NodeHealth{Reason: why + "\nsecond line"})
	if n := view(); n.State != api.NodeDrained || !n.Drain || n.DrainedBy != state.HealthCheckBy || n.Reason != why || n.Health != why || n.DrainedAt.IsZero() || !n.HealthAt.Equal(n.DrainedAt) {
		t.Fatalf("after a failing check: %+v", n)
	}
	if open() {
		t.Fatal("the scheduler still places on the failing node")
	}
	at := srv.Store().Snapshot().NodesIndex()
	beat(api.NodeHealth{Reason: why})
	if srv.Store().Snapshot().NodesIndex() != at {
		t.Fatal("the same failing verdict was committed again")
	}
	beat(api.NodeHealth{OK: true})
	if n := view(); n.Drain || n.State != api.NodeUp || n.Reason != "" || n.Health != "" || !n.HealthAt.IsZero() || !open() {
		t.Fatalf("after a passing check: %+v (open %v)", n, open())
	}
	// An admin drains while the check fails: the pass keeps the drain.
	beat(api.NodeHealth{Reason: why})
	if _, err := srv.Drain(ctx, api.NodeDrain{Nodes: []string{"n1"}, Reason: "DIMM swap"}, "root"); err != nil {
		t.Fatal(err)
	}
	if n := view(); n.Reason != "DIMM swap" || n.DrainedBy != "root" || n.Health != why {
		t.Fatalf("admin drain while failing: %+v", n)
	}
	beat(api.NodeHealth{OK: true})
	if n := view(); !n.Drain || n.Reason != "DIMM swap" || n.DrainedBy != "root" || n.Health != "" || open() {
		t.Fatalf("admin drain after the check passed: %+v (open %v)", n, open())
	}
	// An admin's drain before the check fails stays too.
	beat(api.NodeHealth{Reason: why})
	beat(api.NodeHealth{OK: true})
	if n := view(); !n.Drain || n.Reason != "DIMM swap" || open() {
		t.Fatalf("admin drain after a fail and a pass: %+v", n)
	}
}
