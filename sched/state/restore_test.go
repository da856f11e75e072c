package state

import (
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestReconcileDumpOtherHistory: the state a restore replaces holds jobs
// of another history (schedd started on an empty data dir and took two
// submits before the restore): their ids are the backup's jobs', so they
// are not mixed in (Dropped), the backup's rows stay, and the next id is
// above the backup's, the live state's and the floor. The dump's
// indexes rise to the live state's, so a blocking query does not see the
// state go back.
func TestReconcileDumpOtherHistory(t *testing.T) {
	backup := newHarness(t)
	for range 3 {
		backup.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	}
	d := backup.st.Snapshot().Dump()

	live := newHarness(t)
	for range 10 {
		live.apply(Command{Act: Touch{}}) // a later index than the backup's
	}
	for range 2 {
		live.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}) // ids 1 and 2, submitted at other times
	}
	liveIdx, _ := live.st.Snapshot().Index()
	r := ReconcileDump(&d, RestoreFacts{Live: live.st.Snapshot(), Floor: 7})
	if len(r.Dropped) != 2 || len(r.Kept) != 0 || len(r.Newer) != 0 || r.LastJobID != 7 {
		t.Fatalf("reconciled %+v; want jobs 1 and 2 dropped and the next id 8", r)
	}
	st := New()
	if err := st.Restore(d); err != nil {
		t.Fatal(err)
	}
	v := st.Snapshot()
	if idx, _ := v.Index(); idx < liveIdx {
		t.Errorf("restored index %d, below the replaced state's %d", idx, liveIdx)
	}
	if v.LastJobID() != 7 {
		t.Errorf("restored last job id %d, want 7", v.LastJobID())
	}
	for id := uint64(1); id <= 3; id++ {
		if j := v.Job(id); j == nil || !j.Submitted.Equal(backup.job(id).Submitted) {
			t.Errorf("job %d: %+v, want the backup's", id, j)
		}
	}
}

// TestReconcileDumpEndedFromStore: a job the backup shows running whose
// run the accounting store holds ended is ended with the stored outcome,
// containers included; a record of an earlier run changes nothing.
func TestReconcileDumpEndedFromStore(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	d := h.st.Snapshot().Dump()
	rec := EndedRun{ID: 1, State: api.JobFailed, ExitCode: 9, Reason: "exit 9", Started: t0, Ended: t0.Add(5),
		Containers: []RunContainer{{Host: "main1", Node: "n1", State: api.ContainerExited, ExitCode: 9}}}
	old := EndedRun{ID: 2, Requeues: -1, State: api.JobCompleted}
	r := ReconcileDump(&d, RestoreFacts{Ended: map[uint64][]EndedRun{1: {rec}, 2: {old}}})
	if len(r.Ended) != 1 || r.Ended[0] != 1 {
		t.Fatalf("ended %v, want job 1 only", r.Ended)
	}
	j := d.Jobs[0]
	if j.State != api.JobFailed || j.ExitCode != 9 || j.Containers[0].State != api.ContainerExited || j.Containers[0].Node != "n1" || !j.Ended.Equal(rec.Ended) {
		t.Errorf("job 1 = %+v, want it ended as stored", j)
	}
	if h.job(1).State != api.JobPending {
		t.Errorf("the backup's own row was changed: %s", h.job(1).State)
	}
	if d.Jobs[1].State != api.JobPending {
		t.Errorf("job 2 = %s, want it left PENDING (the record is an earlier run's)", d.Jobs[1].State)
	}
}

// TestReportOfUnknownJobRaisesIDs: a node reports a job the state does
// not hold, with an id above every id given (it runs a job of a history
// this state lost): the id counter rises past it, so the id is not
// handed out again. An id at or below the counter, one absurdly far
// above it, or an entry of schema 7 changes nothing.
func TestReportOfUnknownJobRaisesIDs(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	rep := func(v int, id uint64) {
		h.apply(Command{Version: v, Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{{JobID: id, Host: "main1", State: api.ContainerKilled}}}}}})
	}
	rep(7, 40)
	if last := h.st.Snapshot().LastJobID(); last != 1 {
		t.Fatalf("a schema 7 entry raised the id counter to %d", last)
	}
	rep(SchemaVersion, 40)
	rep(SchemaVersion, 30)
	rep(SchemaVersion, 40+maxIDJump+1)
	if last := h.st.Snapshot().LastJobID(); last != 40 {
		t.Fatalf("id counter %d after reports of unknown jobs 40, 30 and a wild one; want 40", last)
	}
	id := h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}}).([]uint64)[0]
	if id != 41 {
		t.Fatalf("the next submit got id %v, want 41", id)
	}
}

// TestReconcileDumpKeepsRequeuedRuns: the runs a requeue ended since the
// backup (REQUEUED records in the accounting store) are kept as the job's
// earlier runs; a job whose last stored run was requeued moves to the
// next run, queued; one whose later run ended ends as stored, its
// earlier runs kept.
func TestReconcileDumpKeepsRequeuedRuns(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	d := h.st.Snapshot().Dump()
	req := func(id uint64, run int) EndedRun {
		return EndedRun{ID: id, Requeues: run, State: api.JobRequeued, Reason: "node n1 failed", Started: t0.Add(time.Duration(run) * time.Minute), Ended: t0.Add(time.Duration(run)*time.Minute + time.Second),
			Containers: []RunContainer{{Host: "main1", Node: "n1", State: api.ContainerFailed}}}
	}
	done := EndedRun{ID: 2, Requeues: 1, State: api.JobCompleted, Started: t0.Add(time.Hour), Ended: t0.Add(2 * time.Hour),
		Containers: []RunContainer{{Host: "main1", Node: "n2", State: api.ContainerExited}}}
	r := ReconcileDump(&d, RestoreFacts{Ended: map[uint64][]EndedRun{1: {req(1, 1), req(1, 0)}, 2: {done, req(2, 0)}}})
	if len(r.Requeued) != 1 || r.Requeued[0] != 1 || len(r.Ended) != 1 || r.Ended[0] != 2 {
		t.Fatalf("reconciled %+v; want job 1 moved to a later run, job 2 ended", r)
	}
	j := d.Jobs[0]
	if j.State != api.JobPending || j.Requeues != 2 || len(j.Runs) != 2 || !j.Runs[1].Started.Equal(t0.Add(time.Minute)) || j.Runs[0].Containers[0].Node != "n1" {
		t.Fatalf("job 1 = %s run %d, runs %+v; want PENDING at run 2 with runs 0 and 1 kept", j.State, j.Requeues, j.Runs)
	}
	j = d.Jobs[1]
	if j.State != api.JobCompleted || j.Requeues != 1 || len(j.Runs) != 1 || j.Runs[0].Reason != "node n1 failed" {
		t.Fatalf("job 2 = %s run %d, runs %+v; want COMPLETED at run 1 with run 0 kept", j.State, j.Requeues, j.Runs)
	}
}
