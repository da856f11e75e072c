package network

import (
	"errors"
	"sync/atomic"
	"testing"
)

// TestReaperBacklog: the reaper runs deletions in the background, in
// order; with reaperBacklog of them waiting the caller runs its own;
// wait returns once all ran, with the errors recorded, once.
func TestReaperBacklog(t *testing.T) {
	var r reaper
	r.idle.L = &r.mu
	gate := make(chan struct{})
	setHook(t, &testHookReap, func(h *reaper) {
		if h == &r {
			<-gate
		}
	})
	var ran, order atomic.Int64
	inOrder := true
	calls, inline := 0, -1
	for calls = 1; calls <= reaperBacklog+2 && inline < 0; calls++ {
		now, n := true, int64(calls)
		r.do(func() {
			if !now && order.Add(1) != n {
				inOrder = false
			}
			ran.Add(1)
		})
		if ran.Load() == 1 {
			inline = calls
		}
		now = false
	}
	if inline < reaperBacklog || inline > reaperBacklog+2 {
		t.Errorf("call %d ran in the caller, want the first beyond a backlog of %d", inline, reaperBacklog)
	}
	r.do(func() { r.fail(errors.New("boom")) })
	close(gate)
	if err := r.wait(); err == nil || err.Error() != "boom" {
		t.Errorf("wait: %v, want boom", err)
	}
	if got := ran.Load(); got != int64(calls-1) {
		t.Errorf("%d deletions ran, want %d", got, calls-1)
	}
	if !inOrder {
		t.Error("deletions ran out of order")
	}
	if err := r.wait(); err != nil {
		t.Errorf("second wait: %v, want the errors told once", err)
	}
}

// setHook sets one of the package's test hooks (testhooks.go) until the
// test ends.
func setHook[F any](t *testing.T, h *atomic.Pointer[F], f F) {
	t.Helper()
	if !h.CompareAndSwap(nil, &f) {
		t.Fatal("a test hook is already set: an earlier test did not clear it")
	}
	t.Cleanup(func() { h.Store(nil) })
}
