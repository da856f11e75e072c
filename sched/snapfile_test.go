package sched

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/accounting"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// TestSnapshotSaveRestore saves a snapshot through the API, changes the
// state, refuses damaged copies (state untouched) and restores the good
// one.
func TestSnapshotSaveRestore(t *testing.T) {
	srv, c := cluster(t)
	ctx := context.Background()
	register(t, c, "n1", 4)
	var ids []uint64
	for range 3 {
		res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), User: "u", UID: 1000, GID: 1000})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.JobID)
	}
	var file bytes.Buffer
	if err := c.SaveSnapshot(ctx, &file); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(file.String(), "troupe-snapshot/2 ") {
		t.Fatalf("snapshot starts %q", file.String()[:40])
	}
	// Change the state after the save: a fourth job, a killed one.
	if _, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), User: "u", UID: 1000, GID: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kill(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	live := len(srv.Store().Snapshot().Jobs())

	good := file.Bytes()
	nl := bytes.IndexByte(good, '\n')
	flip := bytes.Clone(good)
	flip[nl+10] ^= 0x20
	cases := map[string][]byte{
		"one bit flipped": flip,
		"truncated":       good[:len(good)-5],
		"padded":          append(bytes.Clone(good), '\n'),
		"no header":       good[nl+1:],
		"empty":           nil,
		"bad checksum":    bytes.Replace(bytes.Clone(good), []byte("sha256="), []byte("sha256=00"), 1),
		// The accounting section after the state: its header damaged,
		// or the file cut where the state ends.
		"history header damaged": bytes.Replace(bytes.Clone(good), []byte("troupe-accounting/1"), []byte("troupe-accounting/9"), 1),
		"history row count":      bytes.Replace(bytes.Clone(good), []byte("rows=0"), []byte("rows=1"), 1),
		"history cut off":        good[:bytes.Index(good, []byte("troupe-accounting/1"))],
	}
	h := srv.Handler()
	for name, b := range cases {
		// schedd refuses it, whoever sends it (the body as it is) …
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/snapshot", bytes.NewReader(b)))
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "snapshot file refused") {
			t.Errorf("%s: schedd answered %d %s, want a 400 refusal", name, w.Code, w.Body)
		}
		// … and badmin's client checks it as it sends, and stops.
		if _, err := c.RestoreSnapshot(ctx, bytes.NewReader(b), false); err == nil || !strings.Contains(err.Error(), "snapshot file") {
			t.Errorf("%s: the client sent it with %v, want it refused", name, err)
		}
		if n := len(srv.Store().Snapshot().Jobs()); n != live {
			t.Fatalf("%s: the refused restore changed the state: %d jobs, want %d", name, n, live)
		}
	}
	res, err := c.RestoreSnapshot(ctx, bytes.NewReader(good), false)
	if err != nil {
		t.Fatal(err)
	}
	// What happened since the save stays: the fourth job is kept, the
	// killed one stays cancelled (TestRestoreKeepsWhatHappened).
	if res.Jobs != 4 {
		t.Fatalf("restored %d jobs, want 4", res.Jobs)
	}
	v := srv.Store().Snapshot()
	if n := len(v.Jobs()); n != 4 {
		t.Fatalf("after restore: %d jobs, want 4", n)
	}
	if j := v.Job(ids[0]); j.State != api.JobCancelled && !j.Cancelled {
		t.Fatalf("job %d is %s after the restore, not cancelled; want it still killed", ids[0], j.State)
	}
	// The state goes on: a new submit takes the next id, never one given.
	r, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1)), User: "u", UID: 1000, GID: 1000})
	if err != nil || r.JobID != 5 {
		t.Fatalf("submit after restore: id %d, %v; want 5", r.JobID, err)
	}
}

// snapFile is body as a snapshot file.
func snapFile(body string) []byte {
	sum := sha256.Sum256([]byte(body))
	return fmt.Appendf(nil, "%s index=3 bytes=%d sha256=%s\n%s", snapMagic, len(body), hex.EncodeToString(sum[:]), body)
}

// A snapshot file saved by a schema 4 schedd (each node row the whole
// view, with its derived "allocated"; containers without millicores)
// still reads through the file's strict decoder, and restores with the
// millicores derived; a schema 5 file with "allocated", or any field a
// row does not know, is refused.
func TestSchema4SnapshotFile(t *testing.T) {
	const job = `{"id":7,"session_id":"k1","name":"old","user":"ada","uid":1000,"gid":1000,"cwd":"/home/ada","partition":"default",` +
		`"spec":{"name":"old"},"state":"PENDING","exit_code":0,"containers":[{"host":"main1","role":"main","idx":1,"rank":0,"image":"alpine",` +
		`"resources":{"cpu":0.5,"memory":1073741824},"kernel_id":"k1","state":"pending","exit_code":0}],"submitted":"2026-01-02T03:04:05Z","modify_index":3}`
	node := func(extra string) string {
		return `{"name":"n1","addr":"10.0.0.1","state":"UP","runtime":"runc","capacity":{"cpu_milli":4000,"memory":8589934592},` +
			extra + `"last_heartbeat":"2026-01-02T03:04:05Z","registered":"2026-01-02T03:04:05Z"}`
	}
	body := func(v int, extra string) string {
		return fmt.Sprintf(`{"version":%d,"jobs":[%s],"nodes":[%s],"indexes":[{"table":"jobs","index":3}]}`, v, job, node(extra))
	}
	d, err := ReadSnapshot(bytes.NewReader(snapFile(body(4, `"allocated":{"cpu_milli":0,"memory":0},`))))
	if err != nil {
		t.Fatalf("a schema 4 snapshot file is refused: %v", err)
	}
	st := state.New()
	if err := st.Restore(d); err != nil {
		t.Fatal(err)
	}
	if j := st.Snapshot().Job(7); j == nil || j.Containers[0].CPUMilli != 500 {
		t.Fatalf("restored job 7 = %+v, want its container at 500 millicores", j)
	}
	if n := st.Snapshot().Node("n1"); n == nil || n.Capacity.CPUMilli != 4000 {
		t.Fatalf("restored node n1 = %+v", n)
	}
	for name, b := range map[string]string{
		"schema 5 with allocated": body(state.SchemaVersion, `"allocated":{"cpu_milli":0,"memory":0},`),
		"unknown node field":      body(4, `"bogus":1,`),
	} {
		if _, err := ReadSnapshot(bytes.NewReader(snapFile(b))); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: %v, want ErrBadSnapshot", name, err)
		}
	}
}

// TestHistoryAfter: of a snapshot file's accounting rows, those of runs
// that ended after its state was taken (a job the state holds unended
// or at an earlier run, or one submitted after it) are told apart from
// those the state accounts for; the newest job the state dropped is the
// one the store must hold.
func TestHistoryAfter(t *testing.T) {
	job := func(id uint64, st api.JobState, requeues int) *state.Job {
		return &state.Job{ID: id, State: st, Requeues: requeues}
	}
	f := &SnapshotFile{HasHistory: true, State: state.Dump{Jobs: []*state.Job{
		job(3, api.JobCompleted, 0), job(5, api.JobRunning, 0), job(6, api.JobPending, 1), job(7, api.JobPending, 0),
	}}}
	for _, k := range []accounting.Key{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 5}, {ID: 6}, {ID: 6, Run: 1}, {ID: 8}} {
		f.History = append(f.History, api.HistoryJob{ID: k.ID, Requeues: k.Run})
	}
	inState := map[uint64]*state.Job{}
	for _, j := range f.State.Jobs {
		inState[j.ID] = j
	}
	var got []accounting.Key
	for i := range f.History {
		if h := &f.History[i]; isAfter(inState[h.ID], f.State.LastJobID(), h) {
			got = append(got, accounting.KeyOf(h))
		}
	}
	want := []accounting.Key{{ID: 5}, {ID: 6, Run: 1}, {ID: 8}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows after the snapshot: %v, want %v", got, want)
	}
	if p := newestPurged(&f.State); p != 4 {
		t.Fatalf("newest purged job %d, want 4", p)
	}
	if p := newestPurged(&state.Dump{Jobs: []*state.Job{job(1, api.JobPending, 0), job(2, api.JobPending, 0)}}); p != 0 {
		t.Fatalf("newest purged job %d of a state that dropped none, want 0", p)
	}
}
