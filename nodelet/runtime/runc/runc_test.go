package runc

import (
	"context"
	"os"
	"testing"
	"time"

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

func TestSuite(t *testing.T) {
	runtimetest.Run(t, newTestRuntime(t))
}

// BenchmarkStartWaitDestroy measures one container's whole life: bundle,
// runc run of `true`, exit, delete.
func BenchmarkStartWaitDestroy(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("SKIP: needs root")
	}
	r, err := New("", b.TempDir())
	if err != nil {
		b.Skipf("SKIP: %v", err)
	}
	init := runtimetest.BuildInit(b)
	for b.Loop() {
		spec, _ := runtimetest.NewSpec(b, init, "true")
		c, err := r.Start(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		runtimetest.WaitExit(b, c, 10*time.Second)
		if err := c.Destroy(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
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
