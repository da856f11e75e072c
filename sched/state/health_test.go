package state

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// A failing health verdict drains the node apart from an admin's drain
// and requeues the requeue job running there, excluded from the node,
// while the plain job goes on; a passing one lifts the health drain
// alone, and an admin's drain made meanwhile stays.
func TestHealthVerdict(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Register{Node: &Node{Name: "n2", Addr: "10.0.0.2", Capacity: Resources{CPUMilli: 4000, Memory: 8 << 30}}}})
	rq, plain := session(1), session(1)
	rq.Spec.Requeue = true
	h.apply(Command{Act: Submit{Jobs: []*Job{rq}}})
	h.apply(Command{Act: Submit{Jobs: []*Job{plain}}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}, {JobID: 2, Nodes: []string{"n1"}}}}}})
	h.report("n1", 1, "main1", lifecycle.ContainerRunning, 0)
	h.report("n1", 2, "main1", lifecycle.ContainerRunning, 0)

	why := "ERROR: nhc: Health check failed: check_fs_mount: /scratch not mounted"
	h.apply(Command{Act: Health{Node: "n1", Reason: why}})
	failedAt := t0.Add(8e9)
	n := h.st.Snapshot().Node("n1")
	if n.Health != why || !n.HealthAt.Equal(failedAt) || n.Drain {
		t.Fatalf("failing n1: %+v; want health %q at %s, no admin drain", n, why, failedAt)
	}
	j := h.job(1)
	if j.State != lifecycle.JobPending || j.Requeues != 1 || !slices.Equal(j.ExcludeNodes, []string{"n1"}) || j.Containers[0].Node != "" {
		t.Fatalf("requeue job after the failing check: %s, requeues %d, exclude %v, node %q", j.State, j.Requeues, j.ExcludeNodes, j.Containers[0].Node)
	}
	if !strings.Contains(j.LastRequeue, "health check") || len(j.Runs) != 1 || j.Runs[0].Containers[0].State != lifecycle.ContainerKilled {
		t.Fatalf("requeue job's history: %q, runs %+v", j.LastRequeue, j.Runs)
	}
	if j := h.job(2); j.State != lifecycle.JobRunning || j.KillWanted {
		t.Fatalf("plain job after the failing check: %s (kill %v), want RUNNING", j.State, j.KillWanted)
	}
	// Another failing verdict (a new reason) requeues nothing more.
	h.apply(Command{Act: Health{Node: "n1", Reason: "ERROR: other"}})
	if n := h.st.Snapshot().Node("n1"); n.Health != "ERROR: other" || !n.HealthAt.Equal(failedAt) || h.job(1).Requeues != 1 {
		t.Fatalf("second failing verdict: %+v, requeues %d", n, h.job(1).Requeues)
	}
	// The nodelet restarts: the health drain stays until a verdict.
	h.apply(Command{Act: Register{Node: &Node{Name: "n1", Addr: "10.0.0.1", Capacity: Resources{CPUMilli: 4000, Memory: 8 << 30}}}})
	if n := h.st.Snapshot().Node("n1"); n.Health == "" {
		t.Fatalf("re-registration lifted the health drain: %+v", n)
	}
	// A passing verdict lifts it.
	h.apply(Command{Act: Health{Node: "n1", OK: true}})
	if n := h.st.Snapshot().Node("n1"); n.Health != "" || !n.HealthAt.IsZero() || n.Drain {
		t.Fatalf("passing n1: %+v", n)
	}
	// An admin's drain while failing stays after a passing verdict.
	h.apply(Command{Act: Health{Node: "n1", Reason: why}})
	h.apply(Command{Act: DrainNodes{Drain: &Drain{Nodes: []string{"n1"}, Reason: "DIMM swap", By: "root"}}})
	h.apply(Command{Act: Health{Node: "n1", OK: true}})
	if n := h.st.Snapshot().Node("n1"); !n.Drain || n.Reason != "DIMM swap" || n.Health != "" {
		t.Fatalf("admin drain after a passing verdict: %+v", n)
	}
	// An unknown node is refused; a failing verdict needs a reason.
	for _, bad := range []Health{{Node: "n7", OK: true}, {Node: "n1"}, {OK: true}} {
		h.idx++
		if _, err := h.st.Apply(h.idx, Command{Act: bad}); err == nil {
			t.Errorf("health %+v: applied", bad)
		}
	}
}

// TestHealthEntry: a verdict is written and read back as itself in the
// current schema; it has no form in an older one, so writing it for a
// cluster still in one is refused by name rather than written as
// something its older peers would misread; and only a state in the
// current schema takes verdicts.
func TestHealthEntry(t *testing.T) {
	a := Health{Node: "n1", Reason: "ERROR: /scratch not mounted", Requeue: []string{"batch"}}
	at := t0.Round(0)
	b, err := json.Marshal(Command{Version: SchemaVersion, Time: at, Act: a})
	if err != nil {
		t.Fatal(err)
	}
	var back Command
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if back.Kind() != CmdHealth || !reflect.DeepEqual(back.Act, a) || !back.Time.Equal(at) {
		t.Fatalf("%s reads back as %#v", b, back)
	}
	for _, v := range []int{OldestSchema, commandSchema - 1} {
		if b, err := json.Marshal(Command{Version: v, Time: at, Act: a}); !errors.Is(err, ErrNoOldForm) || !strings.Contains(err.Error(), CmdHealth) {
			t.Errorf("schema %d: %s, %v; want the act refused by name", v, b, err)
		}
		if HealthReports(v) {
			t.Errorf("a state in schema %d takes health verdicts", v)
		}
	}
	if c := (Command{Act: a}); c.NeedsSchema() != SchemaVersion {
		t.Errorf("a health entry needs schema %d, want %d", c.NeedsSchema(), SchemaVersion)
	}
	if !HealthReports(SchemaVersion) {
		t.Error("a state in the current schema takes no health verdicts")
	}
}
