package nodelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/nodelet/gpu"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/runtime/process"
)

// script writes an executable shell script into a fresh directory.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "healthcheck")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// The program's verdict: exit 0 passes; otherwise the first non-empty
// line of standard output, else of standard error, is the reason (NHC
// prints "ERROR: nhc: Health check failed: ..."), trimmed to a sane
// length; without output, how it ended.
func TestHealthProgram(t *testing.T) {
	nhc := "ERROR: nhc:  Health check failed:  check_fs_mount:  /scratch not mounted"
	long := strings.Repeat("x", 1000)
	for _, tt := range []struct {
		name, body string
		ok         bool
		want       string
	}{
		{"passes", "echo all good; exit 0", true, ""},
		{"stdout first line", "echo; echo '  " + nhc + "  '; echo second; exit 1", false, nhc},
		{"stdout before stderr", "echo 'on stderr' >&2; echo 'on stdout'; exit 1", false, "on stdout"},
		{"stderr when stdout is empty", "echo '   ' ; echo '" + nhc + "' >&2; exit 1", false, nhc},
		{"no output", "exit 3", false, "exit status 3"},
		{"long line", "echo " + long + "; exit 1", false, long[:maxHealthReason]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ok, why := runHealthProgram(context.Background(), script(t, tt.body), 10*time.Second, nil)
			if ok != tt.ok || !strings.Contains(why, tt.want) || len(why) > maxHealthReason {
				t.Fatalf("got ok=%v %q, want ok=%v containing %q (at most %d bytes)", ok, why, tt.ok, tt.want, maxHealthReason)
			}
			if tt.name == "long line" && why != tt.want {
				t.Fatalf("long reason %d bytes, want the first %d", len(why), maxHealthReason)
			}
		})
	}
}

// A program past its timeout fails with a reason saying so, and its
// whole process group is killed: a child it left behind (NHC's checks)
// is gone too, and the check returns soon after the timeout even though
// the child held its output open.
func TestHealthProgramTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	prog := script(t, fmt.Sprintf("echo 'checking /scratch'\nsleep 300 &\necho $! > %s\nwait", pidFile))
	start := time.Now()
	ok, why := runHealthProgram(context.Background(), prog, 500*time.Millisecond, nil)
	took := time.Since(start)
	if ok || !strings.Contains(why, "timed out after 500ms") || !strings.Contains(why, "checking /scratch") {
		t.Fatalf("got ok=%v %q, want a timeout with the first line", ok, why)
	}
	if took > 5*time.Second {
		t.Fatalf("the check took %s past a 500ms timeout", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	eventually.True(t, 5*time.Second, fmt.Sprintf("the program's child %d killed with its group", pid), func() bool {
		return syscall.Kill(pid, 0) != nil || zombie(pid)
	})
}

// zombie says whether pid has exited and waits for its reaper.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

// A program that is not there any more fails the node.
func TestHealthProgramMissing(t *testing.T) {
	ok, why := runHealthProgram(context.Background(), filepath.Join(t.TempDir(), "gone"), time.Second, nil)
	if ok || !strings.Contains(why, "cannot run") {
		t.Fatalf("got ok=%v %q", ok, why)
	}
}

// checkRuntime is a runtime whose cheap trial fails with err.
type checkRuntime struct {
	runtime.Runtime
	err error
}

func (c checkRuntime) Check(context.Context) error { return c.err }

// healthAgent is an agent with what the checks read, its state and run
// directories fresh.
func healthAgent(t *testing.T, rt runtime.Runtime, gpus []gpu.Device, prog string) *healthChecker {
	t.Helper()
	cfg := Config{Name: "n1", StateDir: t.TempDir(), RunDir: t.TempDir(),
		Health: HealthCheck{Program: prog, Interval: time.Second, Timeout: 5 * time.Second}}
	a := (&agent{cfg: cfg, log: testLog(), rt: rt, gpus: gpus}).wire()
	return newHealthChecker(a)
}

// The nodelet's own checks fail the node without any program: the
// container runtime failing its cheap trial, a GPU the driver reports
// lost or with uncorrectable ECC errors (a stand-in for NVML here), the
// driver gone; a program's verdict counts only once they pass, and a
// change of verdict is signalled to the heartbeat.
func TestHealthBuiltinChecks(t *testing.T) {
	devs := []gpu.Device{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}}
	h := healthAgent(t, checkRuntime{process.New(), nil}, devs, "")
	var st []gpu.Status
	var stErr error
	h.gpuStatus = func() ([]gpu.Status, error) { return st, stErr }
	st = []gpu.Status{{Index: 0}, {Index: 1}}
	if v := h.check(context.Background()); !v.OK {
		t.Fatalf("healthy node: %+v", v)
	}
	select {
	case <-h.changed:
		t.Fatal("a healthy first verdict signalled a change")
	default:
	}
	for _, tt := range []struct {
		name string
		set  func()
		want string
	}{
		{"lost GPU", func() { st = []gpu.Status{{Index: 0}, {Index: 1, Lost: true}} }, "GPU 1 (GPU-b) is lost: the driver no longer reaches it"},
		{"GPU missing from the driver", func() { st = []gpu.Status{{Index: 0}} }, "GPU 1 (GPU-b) is lost: the driver no longer reaches it"},
		{"uncorrectable ECC", func() { st = []gpu.Status{{Index: 0, UncorrectedECC: 2}, {Index: 1}} }, "GPU 0 (GPU-a) has 2 uncorrectable ECC errors"},
		{"driver gone", func() { st, stErr = nil, errors.New("nvml init: driver not loaded") }, "GPUs: the driver no longer answers: nvml init: driver not loaded"},
		{"runtime", func() {
			st, stErr = []gpu.Status{{Index: 0}, {Index: 1}}, nil
			h.rt = checkRuntime{process.New(), errors.New("runc list: exit status 1")}
		}, "container runtime process fails its check: runc list: exit status 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.set()
			v := h.check(context.Background())
			if v.OK || v.Reason != tt.want {
				t.Fatalf("got %+v, want failing with %q", v, tt.want)
			}
			if cur := h.current(); cur != v {
				t.Fatalf("current %+v, checked %+v", cur, v)
			}
		})
	}
	select {
	case <-h.changed:
	default:
		t.Fatal("a failing verdict signalled no change")
	}
	// The runtime passes again; the program fails, then passes.
	h.rt = checkRuntime{process.New(), nil}
	flip := filepath.Join(t.TempDir(), "fail")
	h.cfg.Health.Program = script(t, "if [ -e "+flip+" ]; then echo 'ERROR: disk /scratch missing'; exit 1; fi")
	if err := os.WriteFile(flip, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if v := h.check(context.Background()); v.OK || v.Reason != "ERROR: disk /scratch missing" {
		t.Fatalf("failing program: %+v", v)
	}
	_ = os.Remove(flip)
	if v := h.check(context.Background()); !v.OK {
		t.Fatalf("passing program: %+v", v)
	}
	select {
	case <-h.changed:
	default:
		t.Fatal("passing again signalled no change")
	}
}

// A full or read-only state or run directory fails the node (tmpfs
// mounts; needs root).
func TestHealthFileSystems(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP (needs root): mounts tmpfs file systems to fill and make read-only")
	}
	mount := func(opts string) string {
		dir := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
			t.Skipf("SKIP: cannot mount tmpfs here: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
		return dir
	}
	small, ro := mount("size=4m"), mount("size=128m,ro")
	h := healthAgent(t, process.New(), nil, "")
	if v := h.check(context.Background()); !v.OK {
		t.Fatalf("healthy directories: %+v", v)
	}
	h.cfg.RunDir = small
	if v := h.check(context.Background()); v.OK || !strings.Contains(v.Reason, "nodelet run dir "+small+": file system full") {
		t.Fatalf("full run dir: %+v", v)
	}
	h.cfg.RunDir, h.cfg.StateDir = t.TempDir(), ro
	if v := h.check(context.Background()); v.OK || v.Reason != "nodelet state dir "+ro+": file system read-only" {
		t.Fatalf("read-only state dir: %+v", v)
	}
}

// nodelet.hcl's health_check block: program, interval and timeout, each
// checked where it is written.
func TestHealthCheckFile(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "nodelet.hcl")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f, err := LoadFile(write("health_check {\n  program  = \"/etc/troupe/healthcheck\"\n  interval = \"60s\"\n  timeout  = \"30s\"\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (HealthCheck{Program: "/etc/troupe/healthcheck", Interval: time.Minute, Timeout: 30 * time.Second}); f.Health != want {
		t.Fatalf("health_check %+v, want %+v", f.Health, want)
	}
	for _, tt := range []struct{ body, want string }{
		{"health_check {\n  program = \"healthcheck\"\n}\n", "Invalid health_check program"},
		{"health_check {\n  interval = \"soon\"\n}\n", "Invalid health_check interval"},
		{"health_check {\n  timeout = \"-1s\"\n}\n", "Invalid health_check timeout"},
		{"health_check {\n  period = \"1s\"\n}\n", "Unsupported argument"},
		{"health_check {}\nhealth_check {}\n", "Duplicate health_check block"},
	} {
		if _, err := LoadFile(write(tt.body)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.body, err, tt.want)
		}
	}
	// At start, a program that is not an executable file is an error.
	for _, prog := range []string{filepath.Join(dir, "missing"), filepath.Join(dir, "nodelet.hcl")} {
		if _, err := (HealthCheck{Program: prog}).withDefaults(); err == nil {
			t.Errorf("program %s: accepted", prog)
		}
	}
	// A program others may change (it runs as root) is refused.
	open := script(t, "exit 0")
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := (HealthCheck{Program: open}).withDefaults(); !errors.Is(err, errUnsafeProgram) {
		t.Errorf("world-writable program: %v", err)
	}
	if h, err := (HealthCheck{Program: script(t, "exit 0")}).withDefaults(); err != nil || h.Program == "" {
		t.Errorf("a root-owned 0755 program: %v", err)
	}
	if h, err := (HealthCheck{}).withDefaults(); err != nil || h.Interval != DefaultHealthInterval || h.Timeout != DefaultHealthTimeout {
		t.Fatalf("defaults: %+v %v", h, err)
	}
}
