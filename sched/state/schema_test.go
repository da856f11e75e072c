package state

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestOlderSchemaEntries: in a cluster in the middle of a rolling
// upgrade the leader writes the previous release's schema, and every
// peer, old or new, must apply such an entry alike: its sender (By),
// which the previous release does not know, is ignored, so a request id
// reused by another user is refused as that release refuses it.
func TestOlderSchemaEntries(t *testing.T) {
	h := newHarness(t)
	a := h.apply(Command{Kind: CmdSubmit, Submit: session(1)}).(uint64)
	b := h.apply(Command{Kind: CmdSubmit, Submit: session(1)}).(uint64)
	h.apply(Command{Version: OldestSchema, Kind: CmdHold, Hold: a, Request: "r", By: "alice"})
	h.idx++
	_, err := h.st.Apply(h.idx, Command{Version: OldestSchema, Kind: CmdHold, Hold: b, Request: "r", By: "bob", Time: t0})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("bob's hold with alice's request id in a schema %d entry: %v, want the conflict the previous release answers", OldestSchema, err)
	}
	if h.job(b).State != api.JobPending {
		t.Fatalf("job %d is %s, want PENDING", b, h.job(b).State)
	}
	// A schema 7 entry knows the sender.
	if theirs := h.apply(Command{Kind: CmdHold, Hold: b, Request: "r", By: "bob"}).(*Job); theirs.ID != b {
		t.Fatalf("bob's hold answered job %d", theirs.ID)
	}
}

// TestSchemaInForce: the state is in the highest schema of what it
// applied (OldestSchema at the least), its dumps carry it, and a
// restore puts it in the dump's.
func TestSchemaInForce(t *testing.T) {
	st := New()
	if v := st.Snapshot().Schema(); v != OldestSchema {
		t.Fatalf("a new state is in schema %d, want %d", v, OldestSchema)
	}
	if _, err := st.Apply(1, Command{Version: OldestSchema, Kind: CmdTouch}); err != nil {
		t.Fatal(err)
	}
	old := st.Snapshot().Dump()
	if old.Version != OldestSchema {
		t.Fatalf("dump after a schema %d entry carries %d", OldestSchema, old.Version)
	}
	// Refused or not, an entry's schema is in the log.
	if _, err := st.Apply(2, Command{Version: SchemaVersion, Kind: CmdKill, Kill: 99}); err == nil {
		t.Fatal("kill of a job that does not exist applied")
	}
	if _, err := st.Apply(3, Command{Version: OldestSchema, Kind: CmdTouch}); err != nil {
		t.Fatal(err)
	}
	if v, d := st.Snapshot().Schema(), st.Snapshot().Dump().Version; v != SchemaVersion || d != SchemaVersion {
		t.Fatalf("after a schema %d entry: schema %d, dump %d", SchemaVersion, v, d)
	}
	if err := st.Restore(old); err != nil {
		t.Fatal(err)
	}
	if v := st.Snapshot().Schema(); v != OldestSchema {
		t.Fatalf("after restoring a schema %d dump: %d", OldestSchema, v)
	}
	if err := st.Restore(Dump{Version: 2}); err != nil {
		t.Fatal(err)
	}
	if v := st.Snapshot().Schema(); v != OldestSchema {
		t.Fatalf("after restoring a schema 2 dump: %d, want %d (never older than what this release writes)", v, OldestSchema)
	}
}

// TestOlderSchemaRuns: entries of a schema before every run was kept
// (nodeRuns) apply as the release that wrote them does, on every peer: a
// requeue keeps no run and carries the usage on, and a report starts and
// ends the job at the entry's time whatever the node says. The same
// entries at SchemaVersion keep the run and take the node's times.
func TestOlderSchemaRuns(t *testing.T) {
	for _, v := range []int{OldestSchema, 8, 9, SchemaVersion} {
		t.Run(fmt.Sprintf("schema %d", v), func(t *testing.T) {
			kept := nodeRuns(v)
			h := newHarness(t)
			j := session(1)
			j.Spec.Requeue = true
			h.apply(Command{Version: v, Kind: CmdSubmit, Submit: j})
			h.apply(Command{Version: v, Kind: CmdPlan, Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}})
			placed := t0.Add(time.Duration(h.idx) * time.Second)
			h.apply(Command{Version: v, Kind: CmdReport, Report: &Report{Node: "n1", Updates: []api.ContainerUpdate{
				{JobID: 1, Host: "main1", State: api.ContainerRunning, CPUTime: 5 * time.Second, At: placed.Add(time.Second / 2), Reach: "10.128.0.2"}}}})
			reported := t0.Add(time.Duration(h.idx) * time.Second)
			if reach := h.job(1).Containers[0].Reach; (reach != "") != kept {
				t.Fatalf("main1's routed address %q kept: %v, want %v (an older peer drops it)", reach, reach != "", kept)
			}
			if got, want := h.job(1).Started, reported; kept {
				want = placed.Add(time.Second / 2)
				if !got.Equal(want) {
					t.Fatalf("started %v, want the node's %v", got, want)
				}
			} else if !got.Equal(want) {
				t.Fatalf("started %v, want the entry's time %v (the node's time ignored)", got, want)
			}
			h.apply(Command{Version: v, Kind: CmdNodeDown, NodeDown: &NodeDown{Nodes: []string{"n1"}}})
			r := h.job(1)
			if r.State != api.JobPending || r.Requeues != 1 {
				t.Fatalf("after the node failure: %s, run %d; want PENDING, run 1", r.State, r.Requeues)
			}
			if kept {
				if len(r.Runs) != 1 || r.Runs[0].CPUTime != 5*time.Second || r.CPUTime != 0 || r.Containers[0].CPUTime != 0 {
					t.Fatalf("runs %+v, usage %v (main1 %v); want run 0 kept with 5s, run 1 at none", r.Runs, r.CPUTime, r.Containers[0].CPUTime)
				}
			} else if len(r.Runs) != 0 || r.CPUTime != 5*time.Second || r.Containers[0].CPUTime != 5*time.Second {
				t.Fatalf("runs %+v, usage %v (main1 %v); want no run kept and the usage carried on, as before", r.Runs, r.CPUTime, r.Containers[0].CPUTime)
			}

			// The next run ends on the node 2 s after it started; the
			// report comes later.
			h.apply(Command{Version: v, Kind: CmdNodeUp, NodeUp: "n1"})
			h.apply(Command{Version: v, Kind: CmdPlan, Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}})
			h.apply(Command{Version: v, Kind: CmdReport, Report: &Report{Node: "n1", Updates: []api.ContainerUpdate{
				{JobID: 1, Host: "main1", Requeues: 1, State: api.ContainerRunning}}}})
			started := h.job(1).Started
			for range 5 {
				h.apply(Command{Version: v, Kind: CmdNodeUp, NodeUp: "n1"})
			}
			h.apply(Command{Version: v, Kind: CmdReport, Report: &Report{Node: "n1", Updates: []api.ContainerUpdate{
				{JobID: 1, Host: "main1", Requeues: 1, State: api.ContainerExited, At: started.Add(2 * time.Second)}}}})
			now := t0.Add(time.Duration(h.idx) * time.Second)
			e := h.job(1)
			want := now
			if kept {
				want = started.Add(2 * time.Second)
			}
			if e.State != api.JobCompleted || !e.Ended.Equal(want) {
				t.Fatalf("job %s ended %v; want COMPLETED at %v", e.State, e.Ended, want)
			}
			if ended := e.Containers[0].Ended; kept != !ended.IsZero() {
				t.Fatalf("main1's end %v kept: %v, want %v", ended, !ended.IsZero(), kept)
			}
		})
	}
}

// TestRunsAcrossTheSchemaChange: a job requeued by an entry of an older
// schema (no run kept) and again by a schema 9 entry keeps no run: Runs[i]
// is run i, and the run 9 saw is run 1, not run 0.
func TestRunsAcrossTheSchemaChange(t *testing.T) {
	h := newHarness(t)
	j := session(1)
	j.Spec.Requeue = true
	h.apply(Command{Kind: CmdSubmit, Submit: j})
	for _, v := range []int{8, 9} {
		h.apply(Command{Version: v, Kind: CmdNodeUp, NodeUp: "n1"})
		h.apply(Command{Version: v, Kind: CmdPlan, Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}})
		h.apply(Command{Version: v, Kind: CmdNodeDown, NodeDown: &NodeDown{Nodes: []string{"n1"}}})
	}
	if r := h.job(1); r.Requeues != 2 || len(r.Runs) != 0 {
		t.Fatalf("after a schema %d and a schema %d requeue: run %d, runs kept %+v; want run 2, none kept (run 0's is unknown)",
			8, 9, r.Requeues, r.Runs)
	}
}
