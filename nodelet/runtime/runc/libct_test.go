//go:build cgo

package runc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	// The test binary is the containers' init in the in-process mode,
	// as the nodelet's is (cmd/nodelet).
	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

func init() { LibcontainerInit() }

// TestSuiteLibcontainer runs the shared runtime suite with containers
// driven in-process by libcontainer (the test binary re-executed as
// their init).
func TestSuiteLibcontainer(t *testing.T) {
	r := newLibctRuntime(t)
	if !strings.HasPrefix(r.OCI(), Libcontainer) {
		t.Errorf("OCI() = %q, want libcontainer (and the module's version where the binary records it)", r.OCI())
	}
	runtimetest.Run(t, r)
}

// TestLibcontainerSecurity runs the runc driver's isolation and
// security tests in the in-process mode: the same namespaces, cgroups,
// seccomp filter, read-only images, OOM verdict, fork-bomb kill and
// cleanup after a restart.
func TestLibcontainerSecurity(t *testing.T) {
	newLibctRuntime(t) // skips as the subtests would
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Isolation", TestIsolation},
		{"RootfsImage", TestRootfsImage},
		{"CleanupRemovesLeftovers", TestCleanupRemovesLeftovers},
		{"OOMKillReported", TestOOMKillReported},
		{"ImageDirUntouched", TestImageDirUntouched},
		{"OverlayCleanedUpAfterRestart", TestOverlayCleanedUpAfterRestart},
		{"ForkBombStops", TestForkBombStops},
		{"Seccomp", TestSeccomp},
		{"Images", TestSuiteImages},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inProcess = true
			t.Cleanup(func() { inProcess = false })
			tc.fn(t)
		})
	}
}

// TestLibcontainerInitIsChild: in the in-process mode the container's
// init is this process's own child (no runc process between them), and
// Destroy leaves neither a process nor libcontainer state behind.
func TestLibcontainerInitIsChild(t *testing.T) {
	r := newLibctRuntime(t)
	init := runtimetest.BuildInit(t)
	spec, _ := runtimetest.NewSpec(t, init, "sleep", "60")
	c := runtimetest.Start(t, r, spec)
	pid := c.(*container).pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("\nPPid:\t%d\n", os.Getpid()); !strings.Contains(string(b), want) {
		t.Errorf("init %d is not this process's child:\n%s", pid, b)
	}
	if ids, _ := r.list(context.Background()); len(ids) != 1 || ids[0] != spec.ID {
		t.Errorf("libcontainer state lists %v, want [%s]", ids, spec.ID)
	}
	if err := c.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !eventually.Within(5*time.Second, func() bool { return len(runtimetest.FindProcs(spec.ID)) == 0 }) {
		t.Errorf("processes left: %v", runtimetest.FindProcs(spec.ID))
	}
	if ids, _ := r.list(context.Background()); len(ids) != 0 {
		t.Errorf("libcontainer state left: %v", ids)
	}
}

// TestProbeLibcontainer: the in-process trial container runs here, and
// leaves nothing behind.
func TestProbeLibcontainer(t *testing.T) {
	newLibctRuntime(t) // skips where the mode cannot run
	dir := t.TempDir()
	if err := ProbeLibcontainer(context.Background(), runtimetest.BuildInit(t), dir); err != nil {
		t.Fatalf("libcontainer probe: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("probe left %d entries in %s", len(ents), dir)
	}
	if err := ProbeLibcontainer(context.Background(), "/nonexistent/troupe-init", t.TempDir()); err == nil {
		t.Error("a trial whose init binary is missing passed")
	}
}

// BenchmarkStartWaitDestroyLibcontainer is BenchmarkStartWaitDestroy in
// the in-process mode.
func BenchmarkStartWaitDestroyLibcontainer(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("SKIP: needs root")
	}
	r, err := NewLibcontainer(b.TempDir())
	if err != nil {
		b.Skipf("SKIP: %v", err)
	}
	benchStartWaitDestroy(b, r)
}

// BenchmarkLibcontainerSessionMounts prices the read-only bind mounts a
// one-container job's session files add (/etc/hosts, /etc/hostname,
// the hostfiles' directory, srun): the same containers of `true` with
// none and with those four, each container's init resolving, creating
// and checking their mountpoints (libcontainer's safe path resolution).
func BenchmarkLibcontainerSessionMounts(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("SKIP: needs root")
	}
	r, err := NewLibcontainer(b.TempDir())
	if err != nil {
		b.Skipf("SKIP: %v", err)
	}
	src := b.TempDir()
	for _, f := range []string{"hosts", "hostname", "srun"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(f+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(src, "session"), 0o755); err != nil {
		b.Fatal(err)
	}
	session := []runtime.Mount{
		{Source: filepath.Join(src, "hosts"), Target: "/etc/hosts", ReadOnly: true},
		{Source: filepath.Join(src, "hostname"), Target: "/etc/hostname", ReadOnly: true},
		{Source: filepath.Join(src, "session"), Target: "/.troupe/session", ReadOnly: true},
		{Source: filepath.Join(src, "srun"), Target: "/.troupe/slurm/srun", ReadOnly: true},
	}
	for _, n := range []int{0, len(session)} {
		b.Run(fmt.Sprintf("mounts=%d", n), func(b *testing.B) {
			benchStartWaitDestroyWith(b, r, func(s *runtime.Spec) { s.Mounts = session[:n] })
		})
	}
}

// helperEnv carries TestLibcontainerHelper's orders: JSON of
// helperOrders.
const helperEnv = "TROUPE_LIBCT_HELPER"

type helperOrders struct {
	State, Init string
	Containers  []helperContainer
}

type helperContainer struct {
	ID, Dir, Out string
	Args         []string
}

// TestLibcontainerHelper is not a test: TestLibcontainerRecoverAfterExit
// runs it in a process of its own, which starts containers in-process
// and exits without destroying them, as a nodelet that stops (SIGQUIT)
// or dies does.
func TestLibcontainerHelper(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("SKIP: helper process of TestLibcontainerRecoverAfterExit only")
	}
	var o helperOrders
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		t.Fatal(err)
	}
	r, err := NewLibcontainer(o.State)
	if err != nil {
		t.Fatal(err)
	}
	for _, hc := range o.Containers {
		out, err := os.OpenFile(hc.Out, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Start(context.Background(), runtime.Spec{ID: hc.ID, Dir: hc.Dir, Init: o.Init, Args: hc.Args,
			Image: runtime.ImageHost, Env: []string{"PATH=" + runtimetest.DefaultPath, runtimetest.MarkEnv + "=" + hc.ID},
			UID: os.Getuid(), GID: os.Getgid(), Stdout: out, Stderr: out})
		if err != nil {
			t.Fatal(err)
		}
	}
	os.Exit(0) // no Destroy, no cleanup: gone as a nodelet that stops
}

// TestLibcontainerRecoverAfterExit: containers whose starting process
// exited (a nodelet stopped or killed) go on, re-parented; a new
// process on the same state directory recovers them: the one still
// running ends with its own exit code when signalled, the one that
// ended while nobody watched reports its code, and Destroy leaves
// nothing.
func TestLibcontainerRecoverAfterExit(t *testing.T) {
	newLibctRuntime(t) // skips as the helper would fail
	state := t.TempDir()
	init := runtimetest.BuildInit(t)
	long, _ := runtimetest.NewSpec(t, init, "sh", "-c", "trap 'exit 7' TERM; echo up; while :; do sleep 0.1; done")
	short, _ := runtimetest.NewSpec(t, init, "sh", "-c", "exit 4")
	o := helperOrders{State: state, Init: init}
	for _, s := range []runtime.Spec{long, short} {
		o.Containers = append(o.Containers, helperContainer{ID: s.ID, Dir: s.Dir, Out: s.Stdout.Name(), Args: s.Args})
	}
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLibcontainerHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !eventually.Within(10*time.Second, func() bool { return runtimetest.ReadFile(t, long.Stdout.Name()) == "up" }) {
		t.Fatalf("long container did not start: %q", runtimetest.ReadFile(t, long.Stdout.Name()))
	}
	pids := runtimetest.FindProcs(long.ID)
	if len(pids) == 0 {
		t.Fatal("long container gone with the process that started it")
	}

	r, err := NewLibcontainer(state)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := r.Recover(context.Background(), long.ID, long.Dir)
	if err != nil {
		t.Fatalf("recover running: %v", err)
	}
	t.Cleanup(func() { _ = cl.Destroy(context.Background()) })
	cs, err := r.Recover(context.Background(), short.ID, short.Dir)
	if err != nil {
		t.Fatalf("recover exited: %v", err)
	}
	t.Cleanup(func() { _ = cs.Destroy(context.Background()) })
	if e := runtimetest.WaitExit(t, cs, 10*time.Second); e.Code != 4 {
		t.Errorf("container that ended while nobody watched: %+v, want code 4", e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if e, err := cl.Wait(ctx); err == nil {
		t.Fatalf("recovered running container reports an exit before any signal: %+v", e)
	}
	if err := cl.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal: %v", err)
	}
	if e := runtimetest.WaitExit(t, cl, 10*time.Second); e.Code != 7 {
		t.Errorf("recovered container: %+v, want code 7", e)
	}
	for _, c := range []runtime.Container{cl, cs} {
		if err := c.Destroy(context.Background()); err != nil {
			t.Errorf("destroy %s: %v", c.ID(), err)
		}
	}
	if ids, _ := r.list(context.Background()); len(ids) != 0 {
		t.Errorf("libcontainer state left: %v", ids)
	}
	if !eventually.Within(5*time.Second, func() bool { return len(runtimetest.FindProcs(long.ID)) == 0 }) {
		t.Errorf("processes left: %v", runtimetest.FindProcs(long.ID))
	}
}

// TestLibcontainerStartCancelled: a start whose context has ended fails
// with the context's error and leaves nothing: no state, no cgroup, no
// directory.
func TestLibcontainerStartCancelled(t *testing.T) {
	r := newLibctRuntime(t)
	spec, _ := runtimetest.NewSpec(t, runtimetest.BuildInit(t), "true")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c, err := r.Start(ctx, spec); !errors.Is(err, context.Canceled) {
		if c != nil {
			_ = c.Destroy(context.Background())
		}
		t.Fatalf("start with an ended context = %v, want context.Canceled", err)
	}
	if ids, _ := r.list(context.Background()); len(ids) != 0 {
		t.Errorf("libcontainer state left: %v", ids)
	}
	for _, p := range CgroupPaths(spec.ID) {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("cgroup %s left", p)
		}
	}
	if _, err := os.Stat(spec.Dir); err == nil {
		t.Errorf("%s left", spec.Dir)
	}
}

// TestLibcontainerHandleFromStart: a container this Runtime started is
// signalled and deleted through libcontainer's handle from its start,
// not by reading its state file again (decoding it, seccomp profile and
// all, was about 1% of a busy node's CPU): with that file made
// unreadable, SIGTERM still ends it with its own exit code, and Destroy
// still leaves no state and no process.
func TestLibcontainerHandleFromStart(t *testing.T) {
	r := newLibctRuntime(t)
	spec, _ := runtimetest.NewSpec(t, runtimetest.BuildInit(t), "sh", "-c", "trap 'exit 7' TERM; echo up; while :; do sleep 0.1; done")
	c := runtimetest.Start(t, r, spec)
	if !eventually.Within(10*time.Second, func() bool { return runtimetest.ReadFile(t, spec.Stdout.Name()) == "up" }) {
		t.Fatalf("container did not start: %q", runtimetest.ReadFile(t, spec.Stdout.Name()))
	}
	if err := os.WriteFile(filepath.Join(r.root, spec.ID, "state.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal with the state file unreadable: %v", err)
	}
	if e := runtimetest.WaitExit(t, c, 10*time.Second); e.Code != 7 {
		t.Errorf("exit %+v, want code 7", e)
	}
	if err := c.Destroy(context.Background()); err != nil {
		t.Fatalf("destroy with the state file unreadable: %v", err)
	}
	if ids, _ := r.list(context.Background()); len(ids) != 0 {
		t.Errorf("libcontainer state left: %v", ids)
	}
	if !eventually.Within(5*time.Second, func() bool { return len(runtimetest.FindProcs(spec.ID)) == 0 }) {
		t.Errorf("processes left: %v", runtimetest.FindProcs(spec.ID))
	}
	if _, ok := r.started.Load(spec.ID); ok {
		t.Error("the handle outlived the container's delete")
	}
}
