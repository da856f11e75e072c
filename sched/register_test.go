package sched

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
)

// TestRegisterSameNameTwice (issue 12 item 9): a second nodelet under a
// live node's name is refused, at registration and on heartbeats; the
// node's own nodelet re-registers after a restart (same instance); once
// the first has been silent for its lease, the second takes over.
func TestRegisterSameNameTwice(t *testing.T) {
	clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	advance := clock.Add
	_, c := clusterWith(t, Config{Clock: clock.Now, NodeTimeout: 30 * time.Second})
	ctx := context.Background()
	reg := func(inst string) error {
		_, err := c.Register(ctx, api.NodeRegister{Name: "n1", Addr: "127.0.0.1", Runtime: "process", Instance: inst,
			Capacity: api.Resources{CPUMilli: 4000, Memory: 16 << 30}})
		return err
	}
	beat := func(inst string) error {
		_, err := c.Do(ctx, http.MethodPost, "/v1/nodes/n1/heartbeat", nil, api.NodeHeartbeat{Instance: inst}, nil)
		return err
	}
	conflict := func(what string, err error) {
		t.Helper()
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict || !strings.Contains(err.Error(), "node n1 is registered by another nodelet") {
			t.Fatalf("%s: %v, want 409 naming the node", what, err)
		}
	}
	if err := reg("aaaaaaaa-first"); err != nil {
		t.Fatal(err)
	}
	advance(5 * time.Second)
	conflict("a second nodelet registering n1", reg("bbbbbbbb-second"))
	conflict("a nodelet without an instance registering n1", reg(""))
	conflict("the second's heartbeat", beat("bbbbbbbb-second"))
	if err := beat("aaaaaaaa-first"); err != nil {
		t.Fatalf("the first's heartbeat: %v", err)
	}
	if err := reg("aaaaaaaa-first"); err != nil {
		t.Fatalf("the first re-registering (its restart): %v", err)
	}
	// The first falls silent; within the timeout n1 stays its.
	advance(10 * time.Second)
	conflict("the second, within the first's lease", reg("bbbbbbbb-second"))
	advance(10 * time.Second)
	if err := reg("bbbbbbbb-second"); err != nil {
		t.Fatalf("the second after the first was silent past its lease: %v", err)
	}
	conflict("the first's heartbeat after the takeover", beat("aaaaaaaa-first"))
	// A crashed nodelet is replaced once its lease (T/2) has run out,
	// not after the whole node timeout.
	if _, err := c.Register(ctx, api.NodeRegister{Name: "n2", Addr: "127.0.0.1", Runtime: "process", Instance: "cccccccc-fast",
		Capacity: api.Resources{CPUMilli: 4000, Memory: 16 << 30}}); err != nil {
		t.Fatal(err)
	}
	reg2 := func() error {
		_, err := c.Register(ctx, api.NodeRegister{Name: "n2", Addr: "127.0.0.1", Runtime: "process", Instance: "dddddddd-next",
			Capacity: api.Resources{CPUMilli: 4000, Memory: 16 << 30}})
		return err
	}
	advance(10 * time.Second)
	if err := reg2(); err == nil {
		t.Fatal("n2 taken 10s after its last heartbeat (lease 15s)")
	}
	advance(6 * time.Second)
	if err := reg2(); err != nil {
		t.Fatalf("n2 silent for 16s (lease 15s): %v", err)
	}
	// Node lists do not show the instance.
	l, err := c.Nodes(ctx)
	if err != nil || len(l.Nodes) != 2 || l.Nodes[0].Instance != "" || l.Nodes[1].Instance != "" {
		t.Fatalf("nodes: %+v, %v", l, err)
	}
}

// TestRegisterOCIRuntime: the OCI runtime a nodelet registers is kept
// and listed with the node (bhosts -l shows it); an absurdly long one
// is refused.
func TestRegisterOCIRuntime(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	reg := api.NodeRegister{Name: "n1", Addr: "127.0.0.1", Runtime: "runc", OCIRuntime: "crun 1.8.1",
		Capacity: api.Resources{CPUMilli: 4000, Memory: 16 << 30}}
	if _, err := c.Register(ctx, reg); err != nil {
		t.Fatal(err)
	}
	list, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodes := list.Nodes
	if len(nodes) != 1 || nodes[0].OCIRuntime != "crun 1.8.1" || nodes[0].Runtime != "runc" {
		t.Errorf("nodes = %+v, want n1 with runtime runc, OCI runtime crun 1.8.1", nodes)
	}
	reg.Name, reg.OCIRuntime = "n2", strings.Repeat("x", 101)
	if _, err := c.Register(ctx, reg); err == nil || !strings.Contains(err.Error(), "oci_runtime longer than 100 bytes") {
		t.Errorf("a 101-byte oci_runtime: %v, want refused", err)
	}
}
