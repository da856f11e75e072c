package nodelet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// gatedRuntime holds every Start until the test lets it go, and counts
// the starts in progress.
type gatedRuntime struct {
	runtime.Runtime
	g *startGate
}

type startGate struct {
	mu      sync.Mutex
	now     int // starts in progress
	most    int // the most at once
	entered chan struct{}
	gates   chan chan struct{} // each start's gate, as it enters
}

func newStartGate() *startGate {
	return &startGate{entered: make(chan struct{}, 64), gates: make(chan chan struct{}, 64)}
}

func (r gatedRuntime) Start(ctx context.Context, spec runtime.Spec) (runtime.Container, error) {
	g := r.g
	gate := make(chan struct{})
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	g.mu.Unlock()
	g.gates <- gate
	g.entered <- struct{}{}
	<-gate
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
	return r.Runtime.Start(ctx, spec)
}

func (g *startGate) most_() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

// waitEntered waits for the next start to reach the runtime.
func (g *startGate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("no further start reached the runtime")
	}
}

func withGate(g *startGate, slots int, lease time.Duration) func(*Config) {
	return func(cfg *Config) {
		cfg.startSlots, cfg.startLease = slots, lease
		cfg.wrapRuntime = func(rt runtime.Runtime) runtime.Runtime { return gatedRuntime{rt, g} }
	}
}

// TestAgentStartsInTurns: a session of five containers on a node of two
// start slots never has more than two starts in the runtime at once;
// each start that finishes lets the next in, and all five run.
func TestAgentStartsInTurns(t *testing.T) {
	f := newFakeSchedd()
	g := newStartGate()
	job := fakeJob(t, 1, t.TempDir(), nil, sh("sleep 60"), sh("sleep 60"), sh("sleep 60"), sh("sleep 60"), sh("sleep 60"))
	f.assign(job)
	startFakeAgent(t, f, RuntimeProcess, t.TempDir(), withGate(g, 2, time.Hour))
	var open []chan struct{}
	t.Cleanup(func() { // before the agent stops: no start stays held
		for len(g.gates) > 0 {
			open = append(open, <-g.gates)
		}
		for _, c := range open {
			close(c)
		}
	})
	remaining := len(job.Containers)
	enter := func() {
		g.waitEntered(t)
		open = append(open, <-g.gates)
		remaining--
	}
	enter()
	enter()
	// Every container is on its way (preparing is reported before the
	// slot is waited for); none gets into the runtime beside the two.
	for _, c := range job.Containers {
		f.waitState(t, 1, c.Host, api.ContainerPreparing)
	}
	select {
	case <-g.entered:
		t.Fatal("a third start reached the runtime while two held the node's two slots")
	case <-time.After(500 * time.Millisecond):
	}
	for len(open) > 0 {
		close(open[0])
		open = open[1:]
		if remaining > 0 {
			enter()
		}
	}
	for _, c := range job.Containers {
		f.waitState(t, 1, c.Host, api.ContainerRunning)
	}
	if m := g.most_(); m != 2 {
		t.Errorf("%d starts in the runtime at once, want 2 (the node's slots)", m)
	}
}

// TestAgentSlowStartGivesUpItsSlot: a start that holds the node's only
// slot past the lease does not keep the next container from starting.
func TestAgentSlowStartGivesUpItsSlot(t *testing.T) {
	f := newFakeSchedd()
	g := newStartGate()
	job := fakeJob(t, 1, t.TempDir(), nil, sh("sleep 60"), sh("sleep 60"))
	f.assign(job)
	startFakeAgent(t, f, RuntimeProcess, t.TempDir(), withGate(g, 1, 100*time.Millisecond))
	var held []chan struct{}
	t.Cleanup(func() {
		for len(g.gates) > 0 {
			held = append(held, <-g.gates)
		}
		for _, c := range held {
			close(c)
		}
	})
	g.waitEntered(t)
	held = append(held, <-g.gates) // the first start stays in the runtime
	g.waitEntered(t)               // the second gets in all the same, after the lease
	held = append(held, <-g.gates)
	for _, c := range held {
		close(c)
	}
	held = nil
	for _, c := range job.Containers {
		f.waitState(t, 1, c.Host, api.ContainerRunning)
	}
}
