package nodelet

import (
	"context"
	goruntime "runtime"
	"sync"
	"time"
)

// Start slots: the node starts at most a few containers at once.
//
// A container's start is mostly CPU (its init's mounts and seccomp, the
// runtime's bundle and cgroup) and the kernel's network lock (RTNL,
// every link change on the node). When a hundred starts run at once on
// a few CPUs they share them: all finish together, at the end, and each
// link change waits behind a lock holder the scheduler has preempted.
// In turns, the first container runs after a few starts' time, not a
// hundred's, and the last no later than before (less contention: less
// CPU spent on it). Waiting starts are served first come, first served
// (a channel's queue of senders), so a session's containers, assigned
// together, start together.
//
// A start that holds its slot longer than startLease (a large image
// unpacked) gives it up and goes on without one: a slow start never
// keeps the node's other containers waiting longer than that.

// DefaultStartSlotsPerCPU is how many starts a node runs at once per
// CPU of the machine.
const DefaultStartSlotsPerCPU = 2

// defaultStartLease is how long a start holds its slot at most.
const defaultStartLease = 10 * time.Second

// startSlots is the node's slots; nil: no limit.
type startSlots struct {
	held  chan struct{}
	lease time.Duration
}

// newStartSlots makes n slots (0: DefaultStartSlotsPerCPU per CPU,
// negative: no limit) that a start holds at most lease (0:
// defaultStartLease).
func newStartSlots(n int, lease time.Duration) *startSlots {
	if n < 0 {
		return nil
	}
	if n == 0 {
		n = DefaultStartSlotsPerCPU * goruntime.NumCPU()
	}
	if lease <= 0 {
		lease = defaultStartLease
	}
	return &startSlots{held: make(chan struct{}, n), lease: lease}
}

// wait takes a slot, in turn, and returns its release (idempotent). A
// stop requested or ctx ended meanwhile lets the start go ahead without
// one (supervise stops it right after, as for a stop during a start).
func (s *startSlots) wait(ctx context.Context, stop <-chan struct{}) (release func()) {
	if s == nil {
		return func() {}
	}
	select {
	case s.held <- struct{}{}:
	case <-stop:
		return func() {}
	case <-ctx.Done():
		return func() {}
	}
	var once sync.Once
	free := func() { once.Do(func() { <-s.held }) }
	lease := time.AfterFunc(s.lease, free)
	return func() {
		lease.Stop()
		free()
	}
}
