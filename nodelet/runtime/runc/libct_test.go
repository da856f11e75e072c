package runc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	// The test binary is the containers' init in the in-process mode,
	// as the nodelet's is (cmd/nodelet).
	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

func init() { LibcontainerInit() }

// newLibctRuntime returns the in-process mode with a private state dir,
// or skips loudly when this test binary or machine cannot run it.
func newLibctRuntime(t *testing.T) *Runtime {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: libcontainer runtime tests need root (euid 0)")
	}
	r, err := NewLibcontainer(t.TempDir())
	if errors.Is(err, ErrNoSeccomp) {
		t.Skipf("SKIP: this test binary cannot apply the containers' seccomp filter: %v (go test -tags seccomp)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Cleanup(context.Background()) })
	return r
}

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
	if !runtimetest.WaitFor(5*time.Second, func() bool { return len(runtimetest.FindProcs(spec.ID)) == 0 }) {
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
