package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
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
		if _, err := c.Submit(ctx, api.SubmitRequest{Spec: spec, User: "u", UID: 1000, GID: 1000}); err != nil {
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
