package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched"
)

// TestSnapshotCommands saves a real schedd's state, refuses a damaged
// copy with the state untouched, and restores the good one.
func TestSnapshotCommands(t *testing.T) {
	ctx := context.Background()
	srv, err := sched.Open(ctx, sched.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	c, _ := client.New(hs.URL)
	spec := jobspec.Job{Name: "s", Image: "host", Command: []string{"true"}, Cluster: jobspec.Cluster{Size: 1, Mode: "single-node"},
		Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30}}
	submit := func() {
		if _, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec), User: "u", UID: 1000, GID: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	submit()
	submit()
	file := filepath.Join(t.TempDir(), "state.snap")
	if code, _, errs := runBadmin("--addr", hs.URL, "snapshot", "save", file); code != 0 {
		t.Fatalf("save: exit %d %s", code, errs)
	}
	submit()
	b, _ := os.ReadFile(file)
	b[len(b)-3] ^= 1
	bad := file + ".bad"
	_ = os.WriteFile(bad, b, 0o600)
	code, _, errs := runBadmin("--addr", hs.URL, "snapshot", "restore", bad)
	if code != 1 || !strings.Contains(errs, "checksum mismatch") {
		t.Fatalf("damaged restore: exit %d %q", code, errs)
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != 3 {
		t.Fatalf("a refused restore changed the state: %d jobs", n)
	}
	// The job submitted after the save is kept: a restore takes no job
	// back in time.
	code, out, errs := runBadmin("--addr", hs.URL, "snapshot", "restore", file)
	if code != 0 || !strings.Contains(out, "3 jobs") {
		t.Fatalf("restore: exit %d %q %q", code, out, errs)
	}
	if n := len(srv.Store().Snapshot().Jobs()); n != 3 {
		t.Fatalf("after restore %d jobs, want 3", n)
	}
	if code, _, _ := runBadmin("snapshot", "save"); code != 2 {
		t.Fatalf("snapshot without FILE: exit %d, want 2", code)
	}
}

// histServer is a real schedd whose ended jobs leave its state for its
// accounting store as soon as they are exported (ExportEnded).
type histServer struct {
	srv  *sched.Server
	url  string
	c    *client.Client
	dir  string
	user string
}

func newHistServer(t *testing.T, user string) *histServer {
	t.Helper()
	dir := t.TempDir()
	srv, err := sched.Open(context.Background(), sched.Config{DataDir: dir, KeepEnded: time.Nanosecond, ExportEvery: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	c, _ := client.New(hs.URL)
	return &histServer{srv: srv, url: hs.URL, c: c, dir: dir, user: user}
}

// run submits n jobs, cancels all but the last keep of them and exports
// the cancelled ones to the store, which purges them from the state.
func (h *histServer) run(t *testing.T, n, keep int) {
	t.Helper()
	ctx := context.Background()
	spec := jobspec.Job{Name: "h", Image: "host", Command: []string{"true"}, Cluster: jobspec.Cluster{Size: 1, Mode: "single-node"},
		Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30}}
	for i := range n {
		res, err := h.c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec), User: h.user, UID: 1000, GID: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if i < n-keep {
			if _, err := h.c.Kill(ctx, res.JobID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := h.srv.ExportEnded(ctx); err != nil {
		t.Fatal(err)
	}
}

// bhistAll is what bhist -a lists: every ended run, the store's and the
// state's, by id.
func (h *histServer) bhistAll(t *testing.T) map[uint64]api.HistoryJob {
	t.Helper()
	res, err := h.c.History(context.Background(), url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]api.HistoryJob{}
	for _, j := range res.Jobs {
		out[j.ID] = j
	}
	return out
}

// TestSnapshotKeepsHistory: a snapshot file carries the accounting
// store, so restoring it into a fresh data dir keeps every history row
// bhist -a showed; a store that holds another cluster's jobs under the
// snapshot's ids is refused with what disagrees and how to go on, and so
// is an older badmin's state-only file where the store lacks the jobs
// the state had handed to it, unless --allow-missing-history.
func TestSnapshotKeepsHistory(t *testing.T) {
	src := newHistServer(t, "alice")
	src.run(t, 8, 2) // jobs 1-6 ended and purged, 7 and 8 pending
	before := src.bhistAll(t)
	if len(before) != 6 || len(src.srv.Store().Snapshot().Jobs()) != 2 {
		t.Fatalf("setup: bhist -a has %d rows, the state %d jobs; want 6 and 2", len(before), len(src.srv.Store().Snapshot().Jobs()))
	}
	file := filepath.Join(t.TempDir(), "state.snap")
	if code, _, errs := runBadmin("--addr", src.url, "snapshot", "save", file); code != 0 {
		t.Fatalf("save: exit %d %s", code, errs)
	}
	// It holds every user's ended jobs, as the store does: schedd's
	// administrators' alone.
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the snapshot file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	if code, _, errs := runBadmin("--addr", src.url, "snapshot", "save", "--allow-missing-history", file); code != 2 || !strings.Contains(errs, "is for snapshot restore") {
		t.Fatalf("save --allow-missing-history: exit %d %q, want a usage error", code, errs)
	}

	t.Run("fresh data dir", func(t *testing.T) {
		dst := newHistServer(t, "alice")
		code, out, errs := runBadmin("--addr", dst.url, "snapshot", "restore", file)
		if code != 0 || !strings.Contains(out, "2 jobs") || !strings.Contains(out, "6 history records (6 put back") {
			t.Fatalf("restore: exit %d %q %q", code, out, errs)
		}
		after := dst.bhistAll(t)
		if len(after) != len(before) {
			t.Fatalf("after the restore bhist -a has %d rows, before it %d", len(after), len(before))
		}
		for id, h := range before {
			a, ok := after[id]
			if !ok || a.State != h.State || a.User != h.User || !a.Submitted.Equal(h.Submitted) || !a.Ended.Equal(h.Ended) {
				t.Fatalf("job %d after the restore: %+v, want %+v", id, a, h)
			}
		}
		if n := len(dst.srv.Store().Snapshot().Jobs()); n != 2 {
			t.Fatalf("restored state has %d jobs, want 2", n)
		}
		// Restoring the same file again finds the store holding it all.
		if code, out, _ := runBadmin("--addr", dst.url, "snapshot", "restore", file); code != 0 || !strings.Contains(out, "(0 put back") {
			t.Fatalf("second restore: exit %d %q", code, out)
		}
	})

	t.Run("another cluster's store", func(t *testing.T) {
		other := newHistServer(t, "bob")
		other.run(t, 3, 0) // its jobs 1-3 are bob's, in its store
		rows := other.bhistAll(t)
		code, out, errs := runBadmin("--addr", other.url, "snapshot", "restore", file)
		store := filepath.Join(other.dir, "accounting.db")
		for _, want := range []string{"the accounting store disagrees with the snapshot", "the accounting store " + store + " holds job 1 (user bob",
			"where the snapshot has job 1 (user alice", "another cluster's store", "nothing was restored", "mv " + store,
			"carries the 6 accounting records"} {
			if code != 1 || !strings.Contains(errs, want) {
				t.Fatalf("restore over another cluster's store: exit %d %q %q; want %q", code, out, errs, want)
			}
		}
		if n := len(other.srv.Store().Snapshot().Jobs()); n != 0 {
			t.Fatalf("the refused restore changed the state: %d jobs", n)
		}
		if after := other.bhistAll(t); len(after) != len(rows) || after[1].User != "bob" {
			t.Fatalf("the refused restore changed the store: %v", after)
		}
	})

	t.Run("state-only file", func(t *testing.T) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		nl := bytes.IndexByte(b, '\n')
		var n int
		if _, err := fmt.Sscanf(strings.Fields(string(b[:nl]))[2], "bytes=%d", &n); err != nil {
			t.Fatal(err)
		}
		old := append([]byte(strings.Replace(string(b[:nl+1]), "troupe-snapshot/2", "troupe-snapshot/1", 1)), b[nl+1:nl+1+n]...)
		oldFile := filepath.Join(t.TempDir(), "old.snap")
		if err := os.WriteFile(oldFile, old, 0o600); err != nil {
			t.Fatal(err)
		}
		dst := newHistServer(t, "alice")
		code, out, errs := runBadmin("--addr", dst.url, "snapshot", "restore", oldFile)
		for _, want := range []string{"the accounting store is older than the snapshot", "had handed job 6 and every earlier ended job",
			"state-only troupe-snapshot/1 file", "badmin snapshot restore --allow-missing-history FILE"} {
			if code != 1 || !strings.Contains(errs, want) {
				t.Fatalf("state-only restore into an empty store: exit %d %q %q; want %q", code, out, errs, want)
			}
		}
		if n := len(dst.srv.Store().Snapshot().Jobs()); n != 0 {
			t.Fatalf("the refused restore changed the state: %d jobs", n)
		}
		code, out, errs = runBadmin("--addr", dst.url, "snapshot", "restore", "--allow-missing-history", oldFile)
		if code != 0 || !strings.Contains(out, "carries no history records") {
			t.Fatalf("restore --allow-missing-history: exit %d %q %q", code, out, errs)
		}
		if n := len(dst.srv.Store().Snapshot().Jobs()); n != 2 {
			t.Fatalf("restored state has %d jobs, want 2", n)
		}
		// Into the store saved with it, the same file restores.
		if code, _, errs := runBadmin("--addr", src.url, "snapshot", "restore", oldFile); code != 0 {
			t.Fatalf("state-only restore over its own store: exit %d %q", code, errs)
		}
	})
}
