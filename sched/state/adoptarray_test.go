package state

import (
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// copyOfRow is a node's copy of row j, as schedd assigned it.
func copyOfRow(j *Job) *Job {
	a := &Job{ID: j.ID, SessionID: j.SessionID, Name: j.Name, User: j.User, UID: j.UID, Partition: j.Partition,
		Spec: j.Spec, Network: j.Network, ArrayID: j.ArrayID, ArrayIndex: j.ArrayIndex, ArraySpan: j.ArraySpan}
	a.Containers = append(a.Containers, j.Containers...)
	return a
}

// elementRow is element idx of an array of "1-4" submitted as job 2
// (after job 1), as a state that held it made it.
func elementRow(t *testing.T, idx int) *Job {
	h, _ := adoptHarness(t, 1, false)
	h.apply(Command{Act: Submit{Jobs: []*Job{arrayJob("1-4", 0)}}})
	e, err := element(h.st.db.Txn(false), 2, idx)
	if err != nil || e == nil {
		t.Fatalf("element 2[%d]: %v, %v", idx, e, err)
	}
	return e
}

// An array submitted after the backup, whose row the restored state
// lacks: in the adoption window, its element a node runs is adopted
// under its array (rebuilt from the node's copy: ID[IDX], RUNNING), and
// one that ended is recorded with its exit code; no other element gets
// a row while the window is open (their ids may be the nodes'); once it
// has closed, the rest of the array gets rows as any array's, and the
// array's counts hold every element. Elements used to be stopped.
func TestAdoptArrayElementsRebuildArray(t *testing.T) {
	e2, e3 := elementRow(t, 2), elementRow(t, 3)
	h, _ := adoptHarness(t, 1, false)
	until := t0.Add(time.Minute)
	windowed(t, h, until, 1)
	began := t0.Add(2500 * time.Millisecond)
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: e2.ID, Host: "main1", State: api.ContainerRunning, Session: e2.SessionID, At: began, Job: copyOfRow(e2)})
	h.reportAt(SchemaVersion, "n1", ContainerUpdate{JobID: e3.ID, Host: "main1", State: api.ContainerExited, ExitCode: 3, Session: e3.SessionID,
		Started: began, At: began.Add(time.Second), Job: copyOfRow(e3)})
	p := h.job(2)
	if p == nil || p.Array == nil || p.Array.Count != 4 || p.State != api.JobRunning {
		t.Fatalf("array 2 after its elements were reported: %+v; want its row rebuilt, 4 elements, RUNNING", p)
	}
	j := h.job(e2.ID)
	if j == nil || j.State != api.JobRunning || j.ArrayID != 2 || j.ArrayIndex != 2 || j.Containers[0].Node != "n2" {
		t.Fatalf("element 2[2] (job %d) running on n2: %+v; want RUNNING under array 2", e2.ID, j)
	}
	if j := h.job(e3.ID); j == nil || j.State != api.JobFailed || j.ExitCode != 3 || j.ArrayID != 2 || j.ArrayIndex != 3 {
		t.Fatalf("element 2[3] (job %d) ended exit 3: %+v; want FAILED exit 3 under array 2", e3.ID, j)
	}
	rows := func() int {
		es, err := elements(h.st.db.Txn(false), 2)
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	if n := rows(); n != 2 {
		t.Fatalf("in the window: %d element rows, want the 2 reported", n)
	}
	h.idx = 100 // past the window
	h.apply(Command{Act: AdoptEnd{}})
	if n := rows(); n != 4 {
		t.Fatalf("after the window: %d element rows, want 4", n)
	}
	p = h.job(2)
	if a := p.Array; a.States[api.JobRunning] != 1 || a.States[api.JobFailed] != 1 || a.States[api.JobPending] != 2 {
		t.Fatalf("array 2 counts %v; want 1 running, 1 failed, 2 pending", a.States)
	}
	if last := h.st.Snapshot().LastJobID(); last <= e3.ID {
		t.Fatalf("last job id %d, want above %d", last, e3.ID)
	}
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: e2.ID, Host: "main1", State: api.ContainerExited, ExitCode: 0, Session: e2.SessionID})
	if j := h.job(e2.ID); j.State != api.JobCompleted || j.ExitCode != 0 {
		t.Fatalf("element 2[2] after its end: %s exit %d, want COMPLETED 0", j.State, j.ExitCode)
	}
}

// An array the restored state holds, throttled (max_running 1), whose
// next element started after the backup under an id the state never
// gave: adopted under the array (its row made before its turn), never
// made again; the array's element the backup shows queued, which ran
// since, ends as it did.
func TestAdoptArrayElementOfRestoredArray(t *testing.T) {
	h, _ := adoptHarness(t, 1, false)
	h.apply(Command{Act: Submit{Jobs: []*Job{arrayJob("1-3", 1)}}}) // array 2, element 1 made (job 3)
	e1, err := element(h.st.db.Txn(false), 2, 1)
	if err != nil || e1 == nil {
		t.Fatalf("element 2[1]: %v %v", e1, err)
	}
	windowed(t, h, t0.Add(time.Minute), 3)
	e2 := clone(e1) // made after the backup, as job 4
	e2.ID, e2.ArrayIndex, e2.SessionID = 4, 2, "sess-2-2"
	h.reportAt(SchemaVersion, "n1", ContainerUpdate{JobID: 3, Host: "main1", State: api.ContainerExited, Session: e1.SessionID, Started: t0, At: t0.Add(time.Second)})
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: 4, Host: "main1", State: api.ContainerRunning, Session: "sess-2-2", At: t0.Add(2 * time.Second), Job: copyOfRow(e2)})
	if j := h.job(3); j.State != api.JobCompleted {
		t.Fatalf("element 2[1], queued in the backup, ended since: %s, want COMPLETED", j.State)
	}
	j := h.job(4)
	if j == nil || j.State != api.JobRunning || j.ArrayID != 2 || j.ArrayIndex != 2 {
		t.Fatalf("element 2[2] started after the backup: %+v; want RUNNING under array 2", j)
	}
	h.idx = 100
	h.apply(Command{Act: AdoptEnd{}})
	es, _ := elements(h.st.db.Txn(false), 2)
	seen := map[int]int{}
	for _, e := range es {
		seen[e.ArrayIndex]++
	}
	if seen[2] != 1 || seen[3] > 1 {
		t.Fatalf("element rows by index after the window: %v; want index 2 once (adopted), never made again", seen)
	}
}

// A copy that cannot rebuild its array (no array in its job file): the
// element is adopted as a plain job under its own id, named NAME[INDEX].
func TestAdoptArrayElementPlainWhenArrayUnknown(t *testing.T) {
	e := elementRow(t, 2)
	h, _ := adoptHarness(t, 1, false)
	windowed(t, h, t0.Add(time.Minute), 1)
	a := copyOfRow(e)
	a.Spec.Array = nil
	h.reportAt(SchemaVersion, "n2", ContainerUpdate{JobID: e.ID, Host: "main1", State: api.ContainerRunning, Session: e.SessionID, Job: a})
	j := h.job(e.ID)
	if j == nil || j.State != api.JobRunning || j.ArrayID != 0 || !strings.HasSuffix(j.Name, "[2]") {
		t.Fatalf("element without its array: %+v; want a plain job NAME[2], RUNNING", j)
	}
	if p := h.job(2); p != nil {
		t.Fatalf("array row %+v made from a copy without an array", p)
	}
}
