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

// windowed is h's state restored, as a restore into an empty state puts
// it in force, with the adoption window open until until and ids above
// above adoptable.
func windowed(t *testing.T, h *harness, until time.Time, above uint64) {
	t.Helper()
	d := h.st.Snapshot().Dump()
	SetAdoption(&d, until, above)
	if err := h.st.Restore(d); err != nil {
		t.Fatal(err)
	}
}

// Within the adoption window, a queued job whose containers its nodes
// report ended (each node tells the ends it keeps) ran and ended after
// the backup: it ends with its true outcome (COMPLETED, or FAILED with
// main1's exit code), from the nodes' start and end, never run again.
// The window survives a dump and restore (a follower's copy, a new
// leader).
func TestAdoptEndedInWindowTrueOutcome(t *testing.T) {
	for _, c := range []struct {
		exit int
		want api.JobState
	}{{0, api.JobCompleted}, {3, api.JobFailed}} {
		h, sess := adoptHarness(t, 2, false)
		until := t0.Add(time.Hour)
		windowed(t, h, until, 1)
		d := h.st.Snapshot().Dump()
		st := New()
		if err := st.Restore(d); err != nil {
			t.Fatal(err)
		}
		if got := st.Snapshot().AdoptUntil(); !got.Equal(until) {
			t.Fatalf("adoption window after a dump and restore: %v, want %v", got, until)
		}
		began, end := t0.Add(3500*time.Millisecond), t0.Add(3700*time.Millisecond)
		h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerExited, ExitCode: c.exit, Session: sess, Started: began, At: end})
		if j := h.job(1); j.State != api.JobPending || !j.Adopting() {
			t.Fatalf("exit %d, one of two ends told: %s %q; want PENDING, adopting", c.exit, j.State, j.Reason)
		}
		h.reportAt(SchemaVersion, "n1", ContainerUpdate{JobID: 1, Host: "sub1", State: api.ContainerKilled, Session: sess, Started: began, At: end})
		j := h.job(1)
		if j.State != c.want || j.ExitCode != c.exit || !j.Started.Equal(began) || !j.Ended.Equal(end) || j.Containers[1].Node != "n1" {
			t.Fatalf("exit %d, every end told: %s exit %d %q, %v–%v, sub1 on %q; want %s exit %d, %v–%v",
				c.exit, j.State, j.ExitCode, j.Reason, j.Started, j.Ended, j.Containers[1].Node, c.want, c.exit, began, end)
		}
	}
}

// A gang whose nodes did not all report it by the end of the adoption
// window is ended at its end (CmdAdoptEnd): FAILED with a reason naming
// what happened, its adopted containers stopped; a gang all of whose
// nodes report is adopted whole, RUNNING.
func TestAdoptGangWaitsForEveryNode(t *testing.T) {
	h, sess := adoptHarness(t, 2, false)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(2)}}})
	sess2 := h.job(2).SessionID
	until := t0.Add(30 * time.Second)
	windowed(t, h, until, 2)
	h.reportAt(SchemaVersion, "n1", ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerRunning, Session: sess})
	h.reportAt(SchemaVersion, "n1", ContainerUpdate{JobID: 2, Host: "main1", State: api.ContainerRunning, Session: sess2})
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: 2, Host: "sub1", State: api.ContainerRunning, Session: sess2})
	if j := h.job(2); j.State != api.JobRunning || j.Containers[0].Node != "n1" || j.Containers[1].Node != "n2" {
		t.Fatalf("a gang both nodes report: %s on %q, %q; want RUNNING on n1 and n2", j.State, j.Containers[0].Node, j.Containers[1].Node)
	}
	if ids := h.st.Snapshot().AdoptingAfter(until); len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("job 1 half adopted at the window's end: AdoptingAfter %v, want [1]", ids)
	}
	h.idx = 100 // past the window (t0 + 100 s)
	h.apply(Command{Act: AdoptEnd{}})
	j := h.job(1)
	if j.State != api.JobFailed || !strings.Contains(j.Reason, "not every node of its gang") || !j.KillWanted || j.Containers[1].State != api.ContainerKilled {
		t.Fatalf("half adopted at the window's end: %s %q kill %v; want FAILED, not every node of its gang", j.State, j.Reason, j.KillWanted)
	}
	if j := h.job(2); j.State != api.JobRunning {
		t.Fatalf("the whole gang after the window: %s, want RUNNING still", j.State)
	}
}

// Within the adoption window, a job the state does not hold that a node
// announces with its copy of the job (submitted after the backup, still
// running) becomes a row, adopted where it runs, under its own id; out
// of the window, or at an id the restored state accounts for, it does
// not.
func TestAdoptJobSubmittedAfterBackup(t *testing.T) {
	h, _ := adoptHarness(t, 1, false)
	copyOf := func(id uint64) *Job {
		j := session(1)
		j.ID, j.User, j.UID = id, "nobody", 65534
		sessionNetwork(j)
		a := &Job{ID: id, SessionID: j.SessionID, User: j.User, UID: j.UID, Partition: "default", Network: j.Network}
		for _, c := range j.Containers {
			c.Node, c.State = "n2", api.ContainerRunning
			a.Containers = append(a.Containers, c)
		}
		return a
	}
	announce := func(id uint64) {
		a := copyOf(id)
		h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: id, Host: "main1", State: api.ContainerRunning, Session: a.SessionID, At: t0.Add(2 * time.Second), Job: a})
	}
	announce(5) // no window: not adopted
	if j := h.job(5); j != nil {
		t.Fatalf("outside an adoption window: job 5 = %s, want none", j.State)
	}
	windowed(t, h, t0.Add(time.Hour), 5)
	announce(5) // accounted for by the restored state
	announce(6)
	if j := h.job(5); j != nil {
		t.Fatalf("an id the restored state accounts for: job 5 = %s, want none", j.State)
	}
	j := h.job(6)
	if j == nil || j.State != api.JobRunning || j.User != "nobody" || j.UID != 65534 || j.Containers[0].Node != "n2" || j.Containers[0].NodeAddr != "10.0.0.2" || j.Containers[0].CPUMilli != 1000 {
		t.Fatalf("job 6 submitted after the backup, announced running in the window: %+v; want RUNNING on n2 as nobody", j)
	}
	if last := h.st.Snapshot().LastJobID(); last < 6 {
		t.Fatalf("last job id %d, want at least 6", last)
	}
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: 6, Host: "main1", State: api.ContainerExited, ExitCode: 4, Session: j.SessionID})
	if j := h.job(6); j.State != api.JobFailed || j.ExitCode != 4 {
		t.Fatalf("adopted job 6 after its end: %s exit %d, want FAILED exit 4", j.State, j.ExitCode)
	}
}

// The adoption window is schema 11's (SchemaAdoptWindow): a cluster
// with a peer of the release that wrote schema 10 gets entries of 10,
// which every peer applies as that release did, window or not: a queued
// job's end reported within the window fails it (it ran after the
// backup), a node's copy of a job the state does not hold makes no row,
// and CmdAdoptEnd, which that release does not know, is refused.
func TestAdoptWindowIsSchema11(t *testing.T) {
	if SchemaAdoptWindow != 11 || SchemaVersion < SchemaAdoptWindow {
		t.Fatalf("SchemaAdoptWindow %d, SchemaVersion %d: want 11 and at least 11", SchemaAdoptWindow, SchemaVersion)
	}
	h, sess := adoptHarness(t, 1, false)
	windowed(t, h, t0.Add(time.Hour), 1)
	began, end := t0.Add(3500*time.Millisecond), t0.Add(3700*time.Millisecond)
	h.reportAt(10, "n2", ContainerUpdate{JobID: 1, Host: "main1", State: api.ContainerExited, Session: sess, Started: began, At: end})
	if j := h.job(1); j.State != api.JobFailed || !strings.Contains(j.Reason, "not run again") {
		t.Fatalf("an end in the window at schema 10: %s %q; want FAILED as schema 10 ends it", j.State, j.Reason)
	}
	a := &Job{ID: 7, SessionID: "s7", User: "nobody", UID: 65534, Partition: "default",
		Containers: []Container{session(1).Containers[0]}}
	h.reportAt(10, "n2", ContainerUpdate{JobID: 7, Host: "main1", State: api.ContainerRunning, Session: "s7", Job: a})
	if j := h.job(7); j != nil {
		t.Fatalf("a node's copy of job 7 at schema 10: row %s; want none", j.State)
	}
	h.idx++
	if _, err := h.st.Apply(h.idx, Command{Version: 10, Act: AdoptEnd{}, Time: t0.Add(2 * time.Hour)}); err == nil {
		t.Fatal("CmdAdoptEnd in an entry of schema 10 applied; want it refused")
	}
	if n := (&Command{Act: AdoptEnd{}}).NeedsSchema(); n != SchemaAdoptWindow {
		t.Fatalf("CmdAdoptEnd needs schema %d, want %d", n, SchemaAdoptWindow)
	}
}

// Within the adoption window, a job the state does not hold whose end a
// node tells with its copy of the job (submitted after the backup, ended
// before the restore; the nodelet keeps the copy with the end) becomes
// an ended row under its own id: its true outcome, node, start, end and
// exit code; the id counter moves past it.
func TestAdoptJobSubmittedAfterBackupEnded(t *testing.T) {
	h, _ := adoptHarness(t, 1, false)
	windowed(t, h, t0.Add(time.Hour), 5)
	j := session(1)
	j.ID, j.User, j.UID = 8, "nobody", 65534
	sessionNetwork(j)
	a := &Job{ID: 8, SessionID: j.SessionID, User: j.User, UID: j.UID, Partition: "default", Network: j.Network}
	for _, c := range j.Containers {
		c.Node, c.State = "n2", api.ContainerRunning
		a.Containers = append(a.Containers, c)
	}
	began, end := t0.Add(1500*time.Millisecond), t0.Add(2500*time.Millisecond)
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: 8, Host: "main1", State: api.ContainerExited, ExitCode: 7, Session: a.SessionID,
		Started: began, At: end, CPUTime: time.Second, Job: a})
	got := h.job(8)
	if got == nil {
		t.Fatal("job 8 ended after the backup, its end told with its copy in the window: no row")
	}
	if got.State != api.JobFailed || got.ExitCode != 7 || got.Containers[0].Node != "n2" || !got.Started.Equal(began) || !got.Ended.Equal(end) ||
		got.User != "nobody" || got.CPUTime != time.Second {
		t.Fatalf("job 8: %s exit %d on %q, %v–%v, user %q, cpu %v; want FAILED exit 7 on n2, %v–%v, nobody, 1s",
			got.State, got.ExitCode, got.Containers[0].Node, got.Started, got.Ended, got.User, got.CPUTime, began, end)
	}
	if last := h.st.Snapshot().LastJobID(); last < 8 {
		t.Fatalf("last job id %d, want at least 8", last)
	}
}
