package runc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// TestProbeRunc: the trial container runs with runc, which works here.
func TestProbeRunc(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the probe needs root (euid 0)")
	}
	bin, err := Find("")
	if err != nil {
		t.Skipf("SKIP: needs the runc binary: %v", err)
	}
	dir := t.TempDir()
	if err := Probe(context.Background(), bin, runtimetest.BuildInit(t), dir); err != nil {
		t.Fatalf("runc probe: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("probe left %d entries in %s", len(ents), dir)
	}
	if v := Version(context.Background(), bin); !strings.HasPrefix(v, "runc ") || len(v) <= len("runc ") {
		t.Errorf("Version(%s) = %q, want runc and a version", bin, v)
	}
}

// TestProbeFails: a binary that is there but runs no container fails
// the probe with its own message.
func TestProbeFails(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "crun")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'crun: cannot set up cgroups here' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := Probe(context.Background(), bin, "/bin/true", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "cannot set up cgroups here") {
		t.Fatalf("probe of a failing binary = %v, want its message", err)
	}
	if v := Version(context.Background(), bin); v != "crun" {
		t.Errorf("Version = %q, want the file name", v)
	}
}

// TestSuiteCrun runs the runtime suite with crun as the OCI runtime
// when crun is installed and passes the probe; otherwise it skips with
// the probe's reason.
func TestSuiteCrun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: crun runtime tests need root (euid 0)")
	}
	bin, err := exec.LookPath(BinCrun)
	if err != nil {
		t.Skipf("SKIP: crun is not installed (contrib/dev/install-deps installs it): %v", err)
	}
	init := runtimetest.BuildInit(t)
	if err := Probe(context.Background(), bin, init, t.TempDir()); err != nil {
		t.Skipf("SKIP: %s is installed but does not work on this machine, so the nodelet would use runc: %v", Version(context.Background(), bin), err)
	}
	r, err := New(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Cleanup(context.Background()) })
	runtimetest.Run(t, r)
}

// BenchmarkProbe measures one trial container with runc: the time
// --oci-runtime auto adds to a nodelet's start when crun is installed
// (the same trial, run by crun).
func BenchmarkProbe(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("SKIP: needs root")
	}
	bin, err := Find("")
	if err != nil {
		b.Skipf("SKIP: %v", err)
	}
	init, dir := runtimetest.BuildInit(b), b.TempDir()
	for b.Loop() {
		if err := Probe(context.Background(), bin, init, dir); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCheck: the health checks' cheap trial passes with the runc that
// works here, and fails, with the runtime's own message, once its
// binary no longer runs.
func TestCheck(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the runc driver needs root (euid 0)")
	}
	if _, err := Find(""); err != nil {
		t.Skipf("SKIP: needs the runc binary: %v", err)
	}
	dir := t.TempDir()
	r, err := NewIn("", filepath.Join(dir, "state"), filepath.Join(dir, "run"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Check(context.Background()); err != nil {
		t.Fatalf("check of a working runc: %v", err)
	}
	broken := filepath.Join(dir, "runc-broken")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'runc: state root unreadable' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.binary = broken
	if err := r.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "runc-broken list: exit status 1: runc: state root unreadable") {
		t.Fatalf("check of a broken runc: %v", err)
	}
}
