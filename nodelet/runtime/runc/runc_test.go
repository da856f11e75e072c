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

// inProcess makes newTestRuntime return the in-process mode
// (NewLibcontainer) while set: TestLibcontainerSecurity runs the runc
// driver's own tests in that mode. No test here runs in parallel.
var inProcess bool

// newTestRuntime returns a runc runtime with a private state dir, or
// skips loudly when this machine cannot run it.
func newTestRuntime(t *testing.T) *Runtime {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: runc runtime tests need root (euid 0)")
	}
	if inProcess {
		return newLibctRuntime(t)
	}
	r, err := New("", t.TempDir())
	if err != nil {
		t.Skipf("SKIP: runc runtime tests need the runc binary: %v", err)
	}
	t.Cleanup(func() { _ = r.Cleanup(context.Background()) })
	return r
}

// newLibctRuntime returns the in-process mode with a private state dir,
// or skips loudly when this test binary or machine cannot run it.
func newLibctRuntime(t *testing.T) *Runtime {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: libcontainer runtime tests need root (euid 0)")
	}
	r, err := NewLibcontainer(t.TempDir())
	if errors.Is(err, ErrNoSeccomp) || errors.Is(err, ErrNoCgo) {
		t.Skipf("SKIP: this test binary cannot run containers in-process: %v (go test -tags seccomp, with cgo)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Cleanup(context.Background()) })
	return r
}

func TestSuite(t *testing.T) {
	runtimetest.Run(t, newTestRuntime(t))
}

// BenchmarkStartWaitDestroy measures one container's whole life: bundle,
// runc run of `true`, exit, delete. cpu-ms/op is the CPU it costs in all
// (see cpuMeter).
func BenchmarkStartWaitDestroy(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("SKIP: needs root")
	}
	r, err := New("", b.TempDir())
	if err != nil {
		b.Skipf("SKIP: %v", err)
	}
	benchStartWaitDestroy(b, r)
}

// benchStartWaitDestroy runs containers of `true` one after another
// with r, and reports the CPU each costs: this process's, what it runs
// (runc, the container's init before it joins its own cgroup) and the
// container's cgroup's, read before Destroy.
func benchStartWaitDestroy(b *testing.B, r *Runtime) {
	benchStartWaitDestroyWith(b, r, nil)
}

// benchStartWaitDestroyWith is benchStartWaitDestroy with each spec
// amended by edit first (nil: as NewSpec makes it).
func benchStartWaitDestroyWith(b *testing.B, r *Runtime, edit func(*runtime.Spec)) {
	init := runtimetest.BuildInit(b)
	m := newCPUMeter(b)
	var inContainers time.Duration
	for b.Loop() {
		spec, _ := runtimetest.NewSpec(b, init, "true")
		if edit != nil {
			edit(&spec)
		}
		c, err := r.Start(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		runtimetest.WaitExit(b, c, 10*time.Second)
		inContainers += c.Usage().CPU
		if err := c.Destroy(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	if m != nil {
		total := m.used(b) + inContainers
		b.ReportMetric(float64(total)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	}
}

// cpuMeter moves this process into a cpuacct cgroup of its own for a
// benchmark: whatever it forks and execs is counted there until it
// moves into a cgroup of its own (a container's).
type cpuMeter struct {
	dir, home string
}

// newCPUMeter starts metering; nil (with a log line) where the node
// has no cgroup v1 cpuacct hierarchy.
func newCPUMeter(b *testing.B) *cpuMeter {
	base := ""
	for _, d := range []string{"cpuacct", "cpu,cpuacct"} {
		if _, err := os.Stat(filepath.Join(cgroupBase, d, "cpuacct.usage")); err == nil {
			base = filepath.Join(cgroupBase, d)
			break
		}
	}
	if base == "" {
		b.Log("no cgroup v1 cpuacct: cpu-ms/op not measured")
		return nil
	}
	home := ""
	if raw, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if f := strings.SplitN(line, ":", 3); len(f) == 3 && strings.Contains(","+f[1]+",", ",cpuacct,") {
				home = filepath.Join(base, f[2])
			}
		}
	}
	if home == "" {
		b.Log("own cpuacct cgroup not found: cpu-ms/op not measured")
		return nil
	}
	dir, err := os.MkdirTemp(base, "troupe-bench-")
	if err != nil {
		b.Fatal(err)
	}
	m := &cpuMeter{dir: dir, home: home}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		_ = syscall.Rmdir(dir)
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(m.home, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		_ = syscall.Rmdir(m.dir)
	})
	return m
}

// used is the CPU time counted in the meter's cgroup so far.
func (m *cpuMeter) used(b *testing.B) time.Duration {
	n, ok := readInt(filepath.Join(m.dir, "cpuacct.usage"))
	if !ok {
		b.Fatalf("reading %s/cpuacct.usage", m.dir)
	}
	return time.Duration(n)
}

// BenchmarkStart measures Start alone (until runc has created it).
func BenchmarkStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("SKIP: needs root")
	}
	r, err := New("", b.TempDir())
	if err != nil {
		b.Skipf("SKIP: %v", err)
	}
	init := runtimetest.BuildInit(b)
	for b.Loop() {
		spec, _ := runtimetest.NewSpec(b, init)
		c, err := r.Start(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = c.Destroy(context.Background())
		b.StartTimer()
	}
}
