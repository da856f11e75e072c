package state

import (
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// adoptHarness is a state holding job 1 queued (the backup's view) and a
// second node, n2.
func adoptHarness(t *testing.T, containers int, requeue bool) (*harness, string) {
	h := newHarness(t)
	h.apply(Command{Act: Register{Node: &Node{Name: "n2", Addr: "10.0.0.2", Capacity: Resources{CPUMilli: 4000, Memory: 8 << 30}}}})
	j := session(containers)
	j.Spec.Requeue = requeue
	h.apply(Command{Act: Submit{Jobs: []*Job{j}}})
	return h, h.job(1).SessionID
}

func (h *harness) reportAt(v int, node string, us ...ContainerUpdate) {
	h.apply(Command{Version: v, Act: Reports{Reports: []Report{Report{Node: node, Updates: us}}}})
}

// A queued job whose containers a node reports running under its own
// session (it started after the backup a restore brought back) is
// adopted: placed there, running, RUNNING from the node's start; never
// placed again.
func TestAdoptQueuedJobItsNodeRuns(t *testing.T) {
	h, sess := adoptHarness(t, 2, false)
	at := t0.Add(3500 * time.Millisecond) // after its submission (t0+3s), before the reports
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerRunning, Session: sess, At: at.Add(250 * time.Millisecond)})
	j := h.job(1)
	if j.State != api.JobPending || j.Containers[0].Node != "n2" || j.Containers[0].NodeAddr != "10.0.0.2" || !j.Adopting() {
		t.Fatalf("one of two containers reported: %s, main1 on %q (%q), adopting %v; want PENDING, main1 adopted on n2", j.State, j.Containers[0].Node, j.Containers[0].NodeAddr, j.Adopting())
	}
	// A plan made before the adoption does not place it again.
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1", "n1"}}}}}})
	if j := h.job(1); j.Containers[0].Node != "n2" || j.State != api.JobPending {
		t.Fatalf("a plan placed an adopting job: %s, main1 on %q", j.State, j.Containers[0].Node)
	}
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: 1, Host: "sub1", State: api.ContainerRunning, Session: sess, At: at})
	j = h.job(1)
	if j.State != api.JobRunning || j.Containers[1].Node != "n2" || j.Containers[1].State != api.ContainerRunning || !j.Started.Equal(at) {
		t.Fatalf("every container reported running: %s, sub1 on %q %s, started %v; want RUNNING on n2 from %v", j.State, j.Containers[1].Node, j.Containers[1].State, j.Started, at)
	}
	// Its end is an ordinary one.
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerExited, Session: sess},
		ContainerUpdate{JobID: 1, Host: "sub1", State: api.ContainerKilled, Session: sess})
	if j := h.job(1); j.State != api.JobCompleted {
		t.Fatalf("after its end: %s, want COMPLETED", j.State)
	}
}

// Another job under the same id (another session), no session at all
// (an older nodelet), or an entry of an older schema: nothing adopted.
func TestAdoptNeedsTheSameSessionAndSchema(t *testing.T) {
	for _, c := range []struct {
		name    string
		version int
		session func(string) string
	}{
		{"another session", SchemaVersion, func(string) string { return "another" }},
		{"no session", SchemaVersion, func(string) string { return "" }},
		{"schema 9", 9, func(s string) string { return s }},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, sess := adoptHarness(t, 1, false)
			h.reportAt(c.version, "n2", ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerRunning, Session: c.session(sess)})
			h.reportAt(c.version, "n2", ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerKilled, Session: c.session(sess)})
			if j := h.job(1); j.State != api.JobPending || j.Containers[0].Node != "" || j.Adopting() {
				t.Fatalf("%s: %s, main1 on %q; want PENDING, unplaced", c.name, j.State, j.Containers[0].Node)
			}
		})
	}
}

// A queued job that ran after the backup and was stopped at the restore
// (its node reports it killed under its session) ends FAILED with that
// reason; asked to be requeued, it is queued as its next run.
func TestAdoptStoppedEndsOrRequeues(t *testing.T) {
	h, sess := adoptHarness(t, 2, false)
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerRunning, Session: sess})
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerKilled, Session: sess})
	j := h.job(1)
	if j.State != api.JobFailed || !strings.Contains(j.Reason, "ran on node n2 after the backup") || !strings.Contains(j.Reason, "not run twice") || j.Ended.IsZero() {
		t.Fatalf("stopped at the restore: %s %q; want FAILED, ran on node n2 after the backup, not run twice", j.State, j.Reason)
	}

	h, sess = adoptHarness(t, 1, true)
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerKilled, Session: sess})
	j = h.job(1)
	if j.State != api.JobPending || j.Requeues != 1 || !strings.Contains(j.LastRequeue, "after the backup") || j.Containers[0].Node != "" {
		t.Fatalf("requeue-able, stopped at the restore: %s run %d %q, main1 on %q; want PENDING, run 1, unplaced", j.State, j.Requeues, j.LastRequeue, j.Containers[0].Node)
	}
}
