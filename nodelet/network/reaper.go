package network

import (
	"errors"
	"sync"
)

// reaperBacklog is how many deletions may wait for the reaper; beyond,
// the caller does its own (a burst of teardowns slows down instead of
// queueing without bound).
const reaperBacklog = 256

// reaperErrors is how many failed deletions the reaper remembers for
// Close to tell.
const reaperErrors = 8

// reaper deletes links off the callers' path, one deletion at a time
// (the kernel serialises them on its rtnl lock anyway), in the order
// they came, on a goroutine that lives while there is work. Set idle.L
// to &mu before use.
type reaper struct {
	mu      sync.Mutex
	idle    sync.Cond // signalled when pending drops to 0; L is mu
	queue   []func()
	pending int // queued or running
	errs    []error
}

// do runs fn in the background, or at once when the backlog is full.
func (r *reaper) do(fn func()) {
	r.mu.Lock()
	if len(r.queue) >= reaperBacklog {
		r.mu.Unlock()
		fn()
		return
	}
	r.queue = append(r.queue, fn)
	r.pending++
	start := r.pending == 1
	r.mu.Unlock()
	if start {
		go r.run()
	}
}

func (r *reaper) run() {
	for {
		r.mu.Lock()
		fn := r.queue[0]
		r.queue[0] = nil
		r.queue = r.queue[1:]
		r.mu.Unlock()
		if h := testHookReap.Load(); h != nil {
			(*h)(r)
		}
		fn()
		r.mu.Lock()
		r.pending--
		if r.pending == 0 {
			r.queue = nil
			r.idle.Broadcast()
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
	}
}

// fail records a background deletion's error, the first few only.
func (r *reaper) fail(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < reaperErrors {
		r.errs = append(r.errs, err)
	}
}

// wait returns once nothing is queued or running, with the errors
// recorded since the last wait.
func (r *reaper) wait() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.pending > 0 {
		r.idle.Wait()
	}
	errs := r.errs
	r.errs = nil
	return errors.Join(errs...)
}
