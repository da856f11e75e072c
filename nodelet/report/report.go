// Package report is how a node delivers its container updates to
// schedd: a queue that never blocks the caller, flushed in order, at most
// MaxBatch updates a report and one report at a time, retried with
// Backoff until schedd takes it. The nodelet and troupe-nodesim's
// simulated nodes share it, so schedd sees the same batches from both.
//
// Every report schedd takes is a raft entry, so the queue spends none on
// what a later update tells anyway: a preparing update waits up to
// PreparingHold for its container's next update, and is dropped when
// that comes first (the container started, or failed to, within the
// hold); it goes out when the hold ends, or at once with any other
// update the queue sends meanwhile.
//
// Of troupe it imports internal/api and internal/backoff only; it must
// not import internal/client (it is handed a send function) or
// sched/....
package report

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/backoff"
)

// MaxBatch caps the updates sent in one report.
const MaxBatch = 256

// PreparingHold is how long a preparing update waits for its
// container's next update before it goes out alone. A container that
// starts within it is reported running only: one raft entry, not two.
// It is shorter than anyone watching bjobs notices, and longer than a
// container's start on a busy node (tens of ms).
const PreparingHold = 250 * time.Millisecond

// Backoff is how a node retries a call to schedd: 100ms, doubling to 5s.
func Backoff() *backoff.Exp { return backoff.New(100*time.Millisecond, 5*time.Second) }

// Queue queues container updates and delivers them in order.
type Queue struct {
	send       func(context.Context, api.ContainerReport) error
	log        *slog.Logger
	logUpdates bool

	sendMu sync.Mutex // one flush at a time: keeps order, no double send
	mu     sync.Mutex
	queue  []queued
	// sending is how many updates at the queue's head a flush is
	// sending: those may not be dropped.
	sending int
	hold    time.Duration // PreparingHold; tests shorten it
	kick    chan struct{} // buffered 1: something was queued
}

// queued is an update waiting to be delivered; held until: a preparing
// update's end of hold (zero: due now).
type queued struct {
	api.ContainerUpdate
	heldUntil time.Time
}

// sameContainer: u and v are about the same run of the same container.
func sameContainer(u, v api.ContainerUpdate) bool {
	return u.JobID == v.JobID && u.Host == v.Host && u.Requeues == v.Requeues
}

// New returns a queue that delivers with send and warns on log; with
// logUpdates it also logs each update as it is queued.
func New(send func(context.Context, api.ContainerReport) error, log *slog.Logger, logUpdates bool) *Queue {
	return &Queue{send: send, log: log, logUpdates: logUpdates, hold: PreparingHold, kick: make(chan struct{}, 1)}
}

// Add queues u; it never blocks. A preparing update is held (see
// PreparingHold); any other update drops its container's preparing
// update that is still held, not yet being sent.
func (r *Queue) Add(u api.ContainerUpdate) {
	q := queued{ContainerUpdate: u}
	r.mu.Lock()
	if u.State == api.ContainerPreparing {
		q.heldUntil = time.Now().Add(r.hold)
	} else {
		for i := len(r.queue) - 1; i >= r.sending; i-- {
			if p := r.queue[i]; p.State == api.ContainerPreparing && sameContainer(p.ContainerUpdate, u) {
				r.queue = append(r.queue[:i], r.queue[i+1:]...)
				break
			}
		}
	}
	r.queue = append(r.queue, q)
	r.mu.Unlock()
	if r.logUpdates {
		r.log.Info("container state", "job", u.JobID, "host", u.Host, "state", u.State,
			"exit_code", u.ExitCode, "message", u.Message)
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run delivers the queue until ctx ends: what is due at once, and held
// updates when their hold ends (or with what is due).
func (r *Queue) Run(ctx context.Context) {
	b := Backoff()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-r.kick:
		case <-timer.C:
		}
		for {
			wait := r.due(time.Now())
			if wait > 0 {
				timer.Reset(wait)
				break
			}
			if wait < 0 {
				break // empty
			}
			if err := r.flushOnce(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				r.log.Warn("report not taken, retrying", "err", err, "queued", r.Pending())
				if b.Wait(ctx) != nil {
					return
				}
				continue
			}
			b.Reset()
		}
	}
}

// Drain delivers what is queued, retrying until ctx ends.
func (r *Queue) Drain(ctx context.Context) error {
	b := Backoff()
	for r.Pending() > 0 {
		if err := r.flushOnce(ctx); err != nil {
			if b.Wait(ctx) != nil {
				return err
			}
		}
	}
	return nil
}

// due says whether the queue has an update to send at now (0), how long
// until its first held update is (> 0), or that it is empty (< 0).
func (r *Queue) due(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return -1
	}
	var first time.Time
	for _, q := range r.queue {
		if q.heldUntil.IsZero() || !q.heldUntil.After(now) {
			return 0
		}
		if first.IsZero() || q.heldUntil.Before(first) {
			first = q.heldUntil
		}
	}
	return first.Sub(now)
}

// Pending is how many updates wait to be delivered.
func (r *Queue) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

// Queued is a copy of the updates waiting to be delivered, in order.
func (r *Queue) Queued() []api.ContainerUpdate {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]api.ContainerUpdate, len(r.queue))
	for i, q := range r.queue {
		out[i] = q.ContainerUpdate
	}
	return out
}

// flushOnce sends the head of the queue, held updates too, and drops
// it once taken.
func (r *Queue) flushOnce(ctx context.Context) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.mu.Lock()
	n := min(len(r.queue), MaxBatch)
	if n == 0 {
		r.mu.Unlock()
		return nil
	}
	batch := make([]api.ContainerUpdate, n)
	for i, q := range r.queue[:n] {
		batch[i] = q.ContainerUpdate
	}
	r.sending = n
	r.mu.Unlock()
	// Sent lets schedd put the updates' times on its own clock.
	err := r.send(ctx, api.ContainerReport{Updates: batch, Sent: time.Now()})
	r.mu.Lock()
	if err == nil {
		r.queue = r.queue[n:]
	}
	r.sending = 0
	r.mu.Unlock()
	return err
}
