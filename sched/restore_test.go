package sched

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// purgeAll exports the ended jobs until none of ids is left in the
// state (KeepEnded is short): they are in the accounting store only.
func purgeAll(t *testing.T, srv *Server, ids ...uint64) {
	t.Helper()
	// Each try exports what KeepEnded (1ms) has let go by then.
	eventually.NoError(t, 10*time.Second, fmt.Sprintf("jobs %v exported and purged", ids), func() error {
		if _, err := srv.ExportEnded(context.Background()); err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, id := range ids {
			if srv.Store().Snapshot().Job(id) != nil {
				left++
			}
		}
		if left > 0 {
			return fmt.Errorf("%d still in the state", left)
		}
		return nil
	})
}

func submitOne(t *testing.T, c *client.Client, hold bool) uint64 {
	t.Helper()
	r, err := c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), User: "u", UID: 1000, GID: 1000, Hold: hold})
	if err != nil {
		t.Fatal(err)
	}
	return r.JobID
}

// TestRestoreKeepsWhatHappened restores, on a running cluster, a
// snapshot saved before a job ended (and left the state for the
// accounting store), a held job was cancelled and a job was submitted.
// The restored state keeps all of it: the ended job ends with its stored
// outcome (not queued again), the cancelled one stays cancelled (not
// run), the running one runs, the later job is there, and the next id
// is above every id given. The restore used to bring back the snapshot's
// jobs as they were (the ended job SCHEDULED, the cancelled one HELD),
// drop the later job and hand its id out again.
func TestRestoreKeepsWhatHappened(t *testing.T) {
	srv, c := clusterWith(t, Config{KeepEnded: time.Millisecond})
	ctx := context.Background()
	register(t, c, "n1", 4)
	done, held, running := submitOne(t, c, false), submitOne(t, c, true), submitOne(t, c, false)
	j := waitJob(t, c, running, func(j api.Job) bool { return j.State == api.JobScheduled })
	if err := c.Report(ctx, j.Containers[0].Node, api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: running, Host: "main1", State: api.ContainerRunning}}}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, done, func(j api.Job) bool { return j.State == api.JobScheduled })
	var file bytes.Buffer
	if err := c.SaveSnapshot(ctx, &file); err != nil {
		t.Fatal(err)
	}

	finish(t, c, done, 3)
	purgeAll(t, srv, done)
	if _, err := c.Kill(ctx, held); err != nil {
		t.Fatal(err)
	}
	later := submitOne(t, c, true)
	stored, err := srv.Accounting().Query(ctx, api.HistoryFilter{IDs: []uint64{done}})
	if err != nil || len(stored) != 1 {
		t.Fatalf("accounting store holds %+v, %v; want job %d", stored, err, done)
	}

	if _, err := c.RestoreSnapshot(ctx, bytes.NewReader(file.Bytes()), false); err != nil {
		t.Fatal(err)
	}
	v := srv.Store().Snapshot()
	if j := v.Job(done); j == nil || j.State != stored[0].State || j.ExitCode != 3 {
		t.Errorf("job %d after restore: %+v; want it ended %s with exit 3, as the accounting store has it", done, j, stored[0].State)
	}
	if j := v.Job(held); j == nil || j.State != api.JobCancelled {
		t.Errorf("job %d after restore: %+v; want it CANCELLED, as it was", held, j)
	}
	if j := v.Job(running); j == nil || j.State != api.JobRunning {
		t.Errorf("job %d after restore: %+v; want it RUNNING, as it was", running, j)
	}
	if j := v.Job(later); j == nil || j.State != api.JobHeld {
		t.Errorf("job %d (submitted after the snapshot) after restore: %+v; want it kept, HELD", later, j)
	}
	if next := submitOne(t, c, true); next != later+1 {
		t.Errorf("the next submit after restore got id %d, want %d (ids are never handed out twice)", next, later+1)
	}
}

// TestRestoreOnEmptyStateIDsAboveAccounting follows schedd(8) RECOVERY:
// a lone server's raft data is lost, schedd starts on an empty data dir
// (the accounting store kept) and the last backup is restored. Jobs
// ended since the backup are in the accounting store only; the restored
// state hands out ids above them, so a new job's record is not lost to
// an old one's. It used to hand their ids out again, and the store
// silently kept the old job under the new job's id.
func TestRestoreOnEmptyStateIDsAboveAccounting(t *testing.T) {
	acct := filepath.Join(t.TempDir(), "accounting.db")
	open := func() (*Server, *client.Client, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		srv, err := Open(ctx, Config{DataDir: t.TempDir(), AccountingPath: acct, KeepEnded: time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { srv.Run(ctx); close(done) }()
		hs := httptest.NewServer(srv.Handler())
		c, err := client.New(hs.URL)
		if err != nil {
			t.Fatal(err)
		}
		stop := func() { hs.Close(); cancel(); <-done; srv.Close() }
		return srv, c, stop
	}
	ctx := context.Background()
	srv, c, stop := open()
	submitOne(t, c, true)
	submitOne(t, c, true)
	var file bytes.Buffer
	if err := c.SaveSnapshot(ctx, &file); err != nil {
		t.Fatal(err)
	}
	ended := endJobs(t, c, 3) // 3, 4, 5: cancelled, exported, purged
	purgeAll(t, srv, ended...)
	stop()

	srv, c, stop = open() // the raft data lost, the accounting store kept
	defer stop()
	if _, err := c.RestoreSnapshot(ctx, bytes.NewReader(file.Bytes()), false); err != nil {
		t.Fatal(err)
	}
	next := submitOne(t, c, false)
	if want := ended[len(ended)-1] + 1; next != want {
		t.Fatalf("the first submit after the restore got id %d, want %d (above the accounting store's %v)", next, want, ended)
	}
	for _, id := range ended {
		h, err := srv.Accounting().Query(ctx, api.HistoryFilter{IDs: []uint64{id}})
		if err != nil || len(h) != 1 || h[0].State != api.JobCancelled {
			t.Errorf("bhist %d: %+v, %v; want the cancelled job", id, h, err)
		}
	}
}

// TestBlockingQueryFromOtherHistory: a blocking query whose index is
// above everything the leader's log holds (the client saw a state that
// went back: a restore, an empty data dir) is answered at once, not
// after its whole wait, so a nodelet resyncs at once.
func TestBlockingQueryFromOtherHistory(t *testing.T) {
	_, c := cluster(t)
	register(t, c, "n1", 4)
	start := time.Now()
	as, err := c.Assignments(context.Background(), "n1", 1<<40, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("an assignments query at an index from another history took %v, want an answer at once", took)
	}
	if as.Index == 0 || as.Index >= 1<<40 {
		t.Fatalf("answered index %d, want the state's", as.Index)
	}
}

// TestExportConflictIsLoud: the accounting store holds another job
// under an ended job's id (an id handed out twice before ids were kept
// above the store's). The export counts it in
// troupe_schedd_accounting_conflicts_total and keeps the job in the
// state (so bhist still shows it) rather than purging it as if stored.
func TestExportConflictIsLoud(t *testing.T) {
	srv, c := clusterWith(t, Config{KeepEnded: time.Millisecond})
	ctx := context.Background()
	stranger := api.HistoryJob{ID: 1, User: "someone-else", State: api.JobCompleted, Submitted: time.Unix(1, 0), Ended: time.Unix(2, 0)}
	if _, err := srv.Accounting().Put(ctx, []api.HistoryJob{stranger}); err != nil {
		t.Fatal(err)
	}
	id := endJobs(t, c, 1)[0]
	if id != 1 {
		t.Fatalf("job id %d, want 1", id)
	}
	for range 3 {
		if _, err := srv.ExportEnded(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // past KeepEnded: a stored job would be purged
	}
	var m dto.Metric
	if err := srv.metrics.acctConflicts.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Errorf("troupe_schedd_accounting_conflicts_total = %v, want 1 (counted once)", got)
	}
	if j := srv.Store().Snapshot().Job(id); j == nil || j.State != api.JobCancelled {
		t.Errorf("job %d after the refused export: %+v; want it kept in the state", id, j)
	}
}

// TestRestoreIntoEmptyStateHoldsPlacements: after a restore into a state
// that held no job (an emptied data dir), schedd places nothing for two
// heartbeat intervals: the nodes first announce the queued jobs they
// run since the backup, which the state adopts rather than place again.
// A node up at once does not get the backup's queued job before then.
func TestRestoreIntoEmptyStateHoldsPlacements(t *testing.T) {
	const timeout = 8 * time.Second
	hold := restorePlaceHold(timeout) // 2 s
	open := func() (*client.Client, func()) { return restoreAt(t, t.TempDir(), timeout) }
	ctx := context.Background()
	c, stop := open()
	id := submitOne(t, c, false) // no node: it stays PENDING
	var file bytes.Buffer
	if err := c.SaveSnapshot(ctx, &file); err != nil {
		t.Fatal(err)
	}
	stop()

	c, stop = open()
	defer stop()
	restored := time.Now()
	if _, err := c.RestoreSnapshot(ctx, bytes.NewReader(file.Bytes()), false); err != nil {
		t.Fatal(err)
	}
	register(t, c, "n1", 4)
	j := waitJob(t, c, id, func(j api.Job) bool { return j.State != api.JobPending })
	if took := time.Since(restored); took < hold {
		t.Fatalf("job %d placed (%s) %v after the restore into an empty state; want no placement for %v", id, j.State, took, hold)
	}
}

// TestRestoreHoldSurvivesLeaderChange: the adoption window a restore into
// an empty state opens is in the replicated state, not in the leader's
// memory: a schedd that takes over during it (here the same data dir
// started again, as a new leader reads the state from its log) places
// nothing before it ends either.
func TestRestoreHoldSurvivesLeaderChange(t *testing.T) {
	const timeout = 8 * time.Second
	hold := restorePlaceHold(timeout) // 2 s
	open := func(dir string) (*client.Client, func()) { return restoreAt(t, dir, timeout) }
	ctx := context.Background()
	c, stop := open(t.TempDir())
	id := submitOne(t, c, false) // no node: it stays PENDING
	var file bytes.Buffer
	if err := c.SaveSnapshot(ctx, &file); err != nil {
		t.Fatal(err)
	}
	stop()

	dir := t.TempDir()
	c, stop = open(dir)
	restored := time.Now()
	if _, err := c.RestoreSnapshot(ctx, bytes.NewReader(file.Bytes()), false); err != nil {
		t.Fatal(err)
	}
	stop()
	c, stop = open(dir) // another leader, during the window
	defer stop()
	register(t, c, "n1", 4)
	j := waitJob(t, c, id, func(j api.Job) bool { return j.State != api.JobPending })
	if took := time.Since(restored); took < hold {
		t.Fatalf("job %d placed (%s) %v after the restore by a schedd that took over; want no placement for %v", id, j.State, took, hold)
	}
}

// TestAssignmentsKeepAdoptingGang: while the adoption window is open, a
// queued job part of whose gang the state adopted on a node stays
// assigned there (it runs on while its other nodes announce theirs);
// once it has closed, it is not.
func TestAssignmentsKeepAdoptingGang(t *testing.T) {
	st := state.New()
	now := time.Unix(1000, 0)
	apply := func(i uint64, c state.Command) {
		c.Time, c.Version = now, state.SchemaVersion
		if _, err := st.Apply(i, c); err != nil {
			t.Fatal(err)
		}
	}
	apply(1, state.Command{Act: state.Register{Node: &state.Node{Name: "n1", Addr: "10.0.0.1", Capacity: state.Resources{CPUMilli: 4000, Memory: 8 << 30}}}})
	j := &state.Job{Name: "g", Partition: "default", State: api.JobPending}
	for i, h := range []string{"main1", "sub1"} {
		c := jobspec.Container{Host: h, Role: jobspec.RoleMain, Idx: 1, Rank: i, Resources: jobspec.Resources{CPU: 1, Memory: 1 << 20}}
		if i > 0 {
			c.Role = jobspec.RoleSub
		}
		rc := rowContainer(c)
		rc.KernelID = h + "-k"
		j.Containers = append(j.Containers, rc)
	}
	j.SessionID = j.Containers[0].KernelID
	apply(2, state.Command{Act: state.Submit{Jobs: []*state.Job{j}}})
	d := st.Snapshot().Dump()
	until := now.Add(time.Minute)
	state.SetAdoption(&d, until, 1)
	if err := st.Restore(d); err != nil {
		t.Fatal(err)
	}
	apply(3, state.Command{Act: state.Reports{Reports: []state.Report{state.Report{Node: "n1", Updates: []state.ContainerUpdate{
		{JobID: 1, Host: "main1", State: api.ContainerRunning, Session: j.SessionID}}}}}})
	v := st.Snapshot()
	if as := AssignmentsAt(v, "n1", now); len(as) != 1 || len(as[0].Hosts) != 1 || as[0].Hosts[0] != "main1" {
		t.Fatalf("in the window: assignments %+v; want job 1's main1 on n1", as)
	}
	if as := AssignmentsAt(v, "n1", until); len(as) != 0 {
		t.Fatalf("after the window: assignments %+v; want none", as)
	}
}

// TestNodesKeepContainersUntilRestore: on an empty data dir, a node's
// report of a job the state does not hold moves the id counter past it
// (ids are never given again), but the state still holds no job: the
// nodes keep their containers (NoJobsYet) for a restore to adopt. The
// flag used to test the id counter, so such a report made every node
// stop what it ran before the backup could be restored.
func TestNodesKeepContainersUntilRestore(t *testing.T) {
	srv, c := cluster(t)
	ctx := context.Background()
	register(t, c, "n1", 4)
	if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: 60, Host: "main1", State: api.ContainerRunning, Session: "s60"}}}); err != nil {
		t.Fatal(err)
	}
	if last := srv.Store().Snapshot().LastJobID(); last != 60 {
		t.Fatalf("id counter %d after a report of job 60; want 60", last)
	}
	as, err := c.Assignments(ctx, "n1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !as.NoJobsYet {
		t.Fatalf("assignments %+v: NoJobsYet false while the state holds no job; the node would stop job 60 before the restore", as)
	}
	submitOne(t, c, true)
	if as, err = c.Assignments(ctx, "n1", 0, 0); err != nil || as.NoJobsYet {
		t.Fatalf("assignments %+v, %v once a job is held: want NoJobsYet false", as, err)
	}
}

// restoreAt is openConfig's controller on dir with its accounting store
// inside and node timeout timeout.
func restoreAt(t *testing.T, dir string, timeout time.Duration) (*client.Client, func()) {
	_, c, stop := openConfig(t, Config{DataDir: dir, AccountingPath: filepath.Join(dir, "accounting.db"), NodeTimeout: timeout})
	return c, stop
}
