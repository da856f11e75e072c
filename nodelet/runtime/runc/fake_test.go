package runc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// TestFakeOCIRuntime: the fake mode prepares the bundle as for runc
// (config.json written), prints the wall clock as the container's
// first output line, starts no process, "runs" until a terminating
// signal, and Destroy leaves nothing; its containers are not
// recovered.
func TestFakeOCIRuntime(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the runc driver's bundle needs root (euid 0)")
	}
	state := t.TempDir()
	r, err := NewFakeIn(state, filepath.Join(state, "run"))
	if err != nil {
		t.Fatal(err)
	}
	if r.OCI() != FakeOCI {
		t.Errorf("OCI() = %q, want %q", r.OCI(), FakeOCI)
	}
	if err := r.Check(context.Background()); err != nil {
		t.Errorf("Check: %v", err)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	dir := filepath.Join(t.TempDir(), "c1")
	before := time.Now()
	c, err := r.Start(context.Background(), runtime.Spec{ID: "fake-1", Image: runtime.ImageHost, Args: []string{"sleep", "600"},
		UID: os.Getuid(), GID: os.Getgid(), Dir: dir, Init: runtimetest.BuildInit(t), Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bundle", "config.json")); err != nil {
		t.Errorf("no bundle: %v", err)
	}
	raw, _ := os.ReadFile(out.Name())
	v, err := strconv.ParseFloat(strings.TrimSuffix(string(raw), "\n"), 64)
	if err != nil || !strings.HasSuffix(string(raw), "\n") || strings.Count(string(raw), "\n") != 1 {
		t.Fatalf("first output %q: want one line, seconds since the epoch", raw)
	}
	if at := time.UnixMicro(int64(v * 1e6)); at.Before(before.Truncate(time.Microsecond)) || at.After(time.Now()) {
		t.Errorf("first output says %v, not between the start's %v and now", at, before)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := c.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait before any signal = %v, want it still running", err)
	}
	cancel()
	if err := c.Signal(syscall.SIGCONT); err != nil {
		t.Errorf("SIGCONT: %v", err)
	}
	if err := c.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exit, err := c.Wait(context.Background())
	if err != nil || exit.Code != 128+int(syscall.SIGTERM) || exit.Signal != syscall.SIGTERM || exit.At.IsZero() {
		t.Errorf("Wait after SIGTERM = %+v, %v; want 143 by SIGTERM, with a time", exit, err)
	}
	if err := c.Signal(syscall.SIGTERM); !errors.Is(err, runtime.ErrNotRunning) {
		t.Errorf("Signal after the end = %v, want ErrNotRunning", err)
	}
	if err := c.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Destroy left %s: %v", dir, err)
	}
	if _, err := r.Recover(context.Background(), "fake-1", dir); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Recover = %v, want ErrNotFound", err)
	}
	if err := r.Cleanup(context.Background()); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
}
