package sched

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// exportServer opens a lone server in dir with clock, without its loop
// (the tests call ExportEnded), and an HTTP client to it.
func exportServer(t *testing.T, dir string, clock *fakeClock, cfg Config) (*Server, *client.Client) {
	t.Helper()
	cfg.DataDir, cfg.Logger, cfg.Clock = dir, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Now
	srv, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	c, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// endJobs submits n held jobs and cancels them: n ended jobs.
func endJobs(t *testing.T, c *client.Client, n int) []uint64 {
	t.Helper()
	ctx := context.Background()
	var ids []uint64
	for range n {
		r, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), Hold: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kill(ctx, r.JobID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.JobID)
	}
	return ids
}

func history(t *testing.T, c *client.Client, q url.Values) []api.HistoryJob {
	t.Helper()
	h, err := c.History(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return h.Jobs
}

// TestEndedJobLeavesAfterKeepEnded: an ended job is in the store at once
// and leaves the replicated state once KeepEnded has passed, not before;
// bhist still shows it (from the store), and job ids go on past it.
func TestEndedJobLeavesAfterKeepEnded(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	srv, c := exportServer(t, t.TempDir(), clock, Config{KeepEnded: 5 * time.Minute})
	ctx := context.Background()
	ids := endJobs(t, c, 3)
	if n, err := srv.ExportEnded(ctx); err != nil || n != 0 {
		t.Fatalf("export at once: purged %d, %v; want 0 (KeepEnded not passed)", n, err)
	}
	if n, _ := srv.Accounting().Count(ctx); n != 3 {
		t.Fatalf("store holds %d rows right after the jobs ended, want 3", n)
	}
	if srv.Store().Snapshot().Job(ids[0]) == nil {
		t.Fatal("job left the state before KeepEnded")
	}
	clock.Add(5*time.Minute - time.Second)
	if n, _ := srv.ExportEnded(ctx); n != 0 {
		t.Fatalf("purged %d a second before KeepEnded", n)
	}
	clock.Add(time.Second)
	if n, err := srv.ExportEnded(ctx); err != nil || n != 3 {
		t.Fatalf("purged %d, %v; want 3", n, err)
	}
	for _, id := range ids {
		if srv.Store().Snapshot().Job(id) != nil {
			t.Fatalf("job %d still in the state after KeepEnded", id)
		}
	}
	if got := history(t, c, url.Values{}); len(got) != 3 || got[0].ID != ids[0] || got[0].State != api.JobCancelled {
		t.Fatalf("bhist after the purge: %+v", got)
	}
	r, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), Hold: true})
	if err != nil || r.JobID != ids[2]+1 {
		t.Fatalf("next job id %d, %v; want %d", r.JobID, err, ids[2]+1)
	}
	if n, _ := srv.Accounting().Count(ctx); n != 3 {
		t.Fatalf("store holds %d rows, want 3 (each job once)", n)
	}
}

var errCrash = errors.New("schedd killed between export and purge")

// TestHandOffCrash: schedd dies after the store committed a batch and
// before the purge command; the restarted schedd exports the same jobs
// again and purges them: every job is in the store exactly once and none
// is left in raft.
func TestHandOffCrash(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	ctx := context.Background()
	srv, c := exportServer(t, dir, clock, Config{KeepEnded: time.Minute})
	ids := endJobs(t, c, 5)
	clock.Add(time.Hour)
	crashed := srv
	setHook(t, &testHookAfterExport, func(r *replica, _ []state.PurgeKey) error {
		if r == crashed.replica {
			return errCrash
		}
		return nil
	})
	if _, err := srv.ExportEnded(ctx); !errors.Is(err, errCrash) {
		t.Fatalf("export with the crash hook: %v", err)
	}
	if n, _ := srv.Accounting().Count(ctx); n != 5 {
		t.Fatalf("store holds %d after the export, want 5", n)
	}
	if len(srv.Store().Snapshot().Jobs()) != 5 {
		t.Fatal("jobs left raft without the purge command")
	}
	srv.Close()

	srv, c = exportServer(t, dir, clock, Config{KeepEnded: time.Minute})
	if len(srv.Store().Snapshot().Jobs()) != 5 {
		t.Fatal("the restarted schedd lost the unpurged jobs")
	}
	if n, err := srv.ExportEnded(ctx); err != nil || n != 5 {
		t.Fatalf("re-export: purged %d, %v; want 5", n, err)
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != 0 {
		t.Fatalf("%d jobs still in raft after the purge", n)
	}
	stored, err := srv.Accounting().Query(ctx, api.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	count := map[uint64]int{}
	for _, h := range stored {
		count[h.ID]++
	}
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("job %d stored %d times, want once", id, count[id])
		}
	}
	if len(stored) != len(ids) {
		t.Errorf("store holds %d rows, want %d", len(stored), len(ids))
	}
	if got := history(t, c, url.Values{}); len(got) != len(ids) {
		t.Errorf("bhist shows %d jobs after the restart, want %d", len(got), len(ids))
	}
}

// TestExportKeepsDependencies: an ended job a pending job depends on
// stays in the state (its dependency is read from there) until the
// dependent ends.
func TestExportKeepsDependencies(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	srv, c := exportServer(t, t.TempDir(), clock, Config{KeepEnded: time.Minute})
	ctx := context.Background()
	ids := endJobs(t, c, 1)
	d, err := api.ParseDependency("ended(" + jsonNum(ids[0]) + ")")
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), DependsOn: d, Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour)
	if n, err := srv.ExportEnded(ctx); err != nil || n != 0 {
		t.Fatalf("purged %d, %v while a pending job depends on it", n, err)
	}
	if _, err := c.Kill(ctx, r.JobID); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour)
	if n, err := srv.ExportEnded(ctx); err != nil || n != 2 {
		t.Fatalf("purged %d, %v once the dependent ended; want 2", n, err)
	}
}

// TestRetention: rows older than AccountingKeep are deleted; younger
// ones stay.
func TestRetention(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	srv, c := exportServer(t, t.TempDir(), clock, Config{KeepEnded: time.Minute, AccountingKeep: 24 * time.Hour})
	ctx := context.Background()
	old := endJobs(t, c, 2)
	if _, err := srv.ExportEnded(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Add(20 * time.Hour)
	young := endJobs(t, c, 1)
	clock.Add(5 * time.Hour) // old ones ended 25 h ago, the young one 5 h ago
	if _, err := srv.ExportEnded(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := srv.Accounting().Query(ctx, api.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != young[0] {
		t.Fatalf("after retention the store holds %+v, want job %d only (not %v)", got, young[0], old)
	}
}

// TestHistoryAndAccountingHTTP: bhist's and bacct's endpoints read the
// store and the ended jobs still in raft, each once, with the filters;
// others' stored jobs come redacted as in-raft ones do.
func TestHistoryAndAccountingHTTP(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	srv, _ := exportServer(t, t.TempDir(), clock, Config{KeepEnded: time.Minute})
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	bob := auth.Identity{UID: 1002, GID: 1002, User: "bob"}
	endAs := func(who auth.Identity, signal bool) uint64 {
		code, body := as(srv, who, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), Hold: true})
		var res api.SubmitResponse
		if code != http.StatusCreated || json.Unmarshal(body, &res) != nil {
			t.Fatalf("submit: %d %s", code, body)
		}
		sig := "KILL"
		if !signal {
			sig = "INT"
		}
		if code, body := as(srv, who, "POST", "/v1/jobs/"+jsonNum(res.JobID)+"/signal", api.SignalJob{Signal: sig}); code != http.StatusOK {
			t.Fatalf("cancel: %d %s", code, body)
		}
		return res.JobID
	}
	a1 := endAs(alice, true)
	endAs(bob, false)
	clock.Add(time.Hour)
	if n, err := srv.ExportEnded(context.Background()); err != nil || n != 2 {
		t.Fatalf("purged %d, %v", n, err)
	}
	a2 := endAs(alice, false) // still in raft
	get := func(who auth.Identity, path string, out any) {
		t.Helper()
		code, body := as(srv, who, "GET", path, nil)
		if code != http.StatusOK || json.Unmarshal(body, out) != nil {
			t.Fatalf("%s: %d %s", path, code, body)
		}
	}
	var h api.History
	get(alice, "/v1/history?user=alice", &h)
	if len(h.Jobs) != 2 || h.Jobs[0].ID != a1 || h.Jobs[1].ID != a2 {
		t.Fatalf("alice's history (store + raft): %+v", h.Jobs)
	}
	get(alice, "/v1/history?state=CANCELLED&partition=default&limit=1", &h)
	if len(h.Jobs) != 1 || h.Jobs[0].ID != a2 {
		t.Fatalf("limit 1: %+v", h.Jobs)
	}
	get(alice, "/v1/history?partition=gpu", &h)
	if len(h.Jobs) != 0 {
		t.Fatalf("partition gpu: %+v", h.Jobs)
	}
	if code, _ := as(srv, alice, "GET", "/v1/history?state=RUNNING", nil); code != http.StatusBadRequest {
		t.Errorf("state RUNNING: %d, want 400", code)
	}
	var hb api.History
	get(bob, "/v1/history?user=alice", &hb)
	if len(hb.Jobs) != 2 {
		t.Fatalf("bob's view of alice's history: %+v", hb.Jobs)
	}
	get(alice, "/v1/history?id="+jsonNum(a1), &h)
	if len(h.Jobs) != 1 || h.Jobs[0].ID != a1 {
		t.Fatalf("id filter: %+v", h.Jobs)
	}
	var acct api.Accounting
	get(bob, "/v1/accounting?group=user", &acct)
	if len(acct.Rows) != 2 || acct.Rows[0].Group != "alice" || acct.Rows[0].Jobs != 2 || acct.Rows[1].Jobs != 1 || acct.Total.Jobs != 3 {
		t.Fatalf("bacct by user: %+v", acct)
	}
	get(bob, "/v1/accounting?group=partition&user=bob", &acct)
	if len(acct.Rows) != 1 || acct.Rows[0].Group != "default" || acct.Rows[0].Jobs != 1 {
		t.Fatalf("bacct by partition for bob: %+v", acct)
	}
	if code, _ := as(srv, bob, "GET", "/v1/accounting?group=node", nil); code != http.StatusBadRequest {
		t.Errorf("group by node: %d, want 400", code)
	}
}

// TestPublicHistory: a stored record redacted for others equals the
// record of the job's public view: no signals, the public reason, no
// container messages.
func TestPublicHistory(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	j := api.Job{ID: 9, Name: "n", User: "alice", UID: 1001, Partition: "default", Account: "phys", State: api.JobFailed, ExitCode: 3,
		Reason: "main1: cannot open /home/alice/secret", Submitted: t0, Started: t0.Add(time.Minute), Ended: t0.Add(time.Hour),
		Signals: []api.SignalRequest{{Seq: 1, Signal: 10, Time: t0.Add(2 * time.Minute)}},
		Containers: []api.Container{{ContainerSpec: wire.ContainerToAPI(jobspec.Container{Host: "main1", Resources: jobspec.Resources{GPU: 2}}), Node: "n1",
			State: api.ContainerFailed, ExitCode: 3, Message: "cannot open /home/alice/secret"}}}
	pub := j.Public()
	want, _ := json.Marshal(HistoryRecord(pub))
	got, _ := json.Marshal(HistoryRecord(j).Public())
	if string(got) != string(want) {
		t.Fatalf("redacted record\n%s\nwant\n%s", got, want)
	}
}

// TestArrayExport: each element of an ended job array is stored as a
// record of its own with its index; the array's own row is not (it ran
// nothing) but leaves the state with them, and bhist's id of the array
// picks its elements.
func TestArrayExport(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	srv, c := exportServer(t, t.TempDir(), clock, Config{KeepEnded: time.Minute})
	ctx := context.Background()
	r, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(arraySpec("1,4,7", 0))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kill(ctx, r.JobID); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Minute)
	if n, err := srv.ExportEnded(ctx); err != nil || n != 4 {
		t.Fatalf("purged %d, %v; want 4 (the array and its 3 elements)", n, err)
	}
	if n, _ := srv.Accounting().Count(ctx); n != 3 {
		t.Fatalf("store holds %d rows, want 3 (the elements)", n)
	}
	if srv.Store().Snapshot().Job(r.JobID) != nil {
		t.Fatal("the array's row is still in the state")
	}
	got := history(t, c, url.Values{"id": {strconv.FormatUint(r.JobID, 10)}})
	if len(got) != 3 {
		t.Fatalf("bhist %d: %+v", r.JobID, got)
	}
	seen := map[int]bool{}
	for _, h := range got {
		if h.ArrayID != r.JobID || h.State != api.JobCancelled {
			t.Fatalf("record %+v", h)
		}
		seen[h.ArrayIndex] = true
	}
	if !seen[1] || !seen[4] || !seen[7] {
		t.Fatalf("indices recorded: %v", seen)
	}
}

// TestEndedElementLeavesOnceStored: an array's element leaves the
// replicated state as soon as the store holds it, KeepEnded or not, and
// is then answered from the store (bhist), while bjob says it is gone
// rather than show it pending; a plain job still waits KeepEnded, and
// the array's other elements are untouched.
func TestEndedElementLeavesOnceStored(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	srv, c := exportServer(t, t.TempDir(), clock, Config{KeepEnded: time.Hour})
	ctx := context.Background()
	r, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(arraySpec("1-300", 0))})
	if err != nil {
		t.Fatal(err)
	}
	plain := endJobs(t, c, 1)[0]
	// Element 2 has its row from the start (the window); element 250
	// gets one when killed before its turn.
	for _, idx := range []int{2, 250} {
		if _, err := c.Control(ctx, api.JobRef{ID: r.JobID, Element: true, Index: idx}, "kill", nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := srv.ExportEnded(ctx); err != nil || n != 2 {
		t.Fatalf("export: purged %d, %v; want 2 (the ended elements, at once)", n, err)
	}
	v := srv.Store().Snapshot()
	for _, idx := range []int{2, 250} {
		if e := v.Element(r.JobID, idx); e != nil {
			t.Errorf("element %d is still in the state: %s", idx, e.State)
		}
		_, _, err := c.JobRef(ctx, api.JobRef{ID: r.JobID, Element: true, Index: idx}, 0, 0)
		if !client.IsNotFound(err) {
			t.Errorf("bjob %d[%d] after its purge: %v, want not found", r.JobID, idx, err)
		}
	}
	if v.Job(plain) == nil {
		t.Errorf("plain job %d left before KeepEnded", plain)
	}
	if e := v.Element(r.JobID, 1); e == nil || e.State != api.JobPending {
		t.Errorf("element 1: %+v, want its row PENDING", e)
	}
	got := history(t, c, url.Values{"id": {strconv.FormatUint(r.JobID, 10)}})
	seen := map[int]api.JobState{}
	for _, h := range got {
		seen[h.ArrayIndex] = h.State
	}
	if len(got) != 2 || seen[2] != api.JobCancelled || seen[250] != api.JobCancelled {
		t.Fatalf("bhist %d: %+v, want elements 2 and 250 CANCELLED from the store", r.JobID, got)
	}
	// The array's listing (bqueue -a --array) still shows them, from the
	// store, in index order, for as long as a plain job stays listed
	// after its end; then no more.
	list, err := c.ArrayElements(ctx, r.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Jobs) != 300 {
		t.Fatalf("the array's listing has %d elements, want 300", len(list.Jobs))
	}
	for i, j := range list.Jobs {
		want := api.JobPending
		if i+1 == 2 || i+1 == 250 {
			want = api.JobCancelled
		}
		if j.ArrayID != r.JobID || j.ArrayIndex != i+1 || j.State != want {
			t.Fatalf("listed element %d: %d[%d] %s, want %d[%d] %s", i, j.ArrayID, j.ArrayIndex, j.State, r.JobID, i+1, want)
		}
	}
	clock.Add(2 * time.Hour)
	if list, err = c.ArrayElements(ctx, r.JobID); err != nil || len(list.Jobs) != 298 {
		t.Fatalf("the array's listing past keep_ended has %d elements (%v), want 298", len(list.Jobs), err)
	}
}
