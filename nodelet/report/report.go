// Package report is how a node delivers its container updates to
// schedd: a queue that never blocks the caller, flushed in order, at most
// MaxBatch updates a report and one report at a time, retried with
// Backoff until schedd takes it. The nodelet and troupe-nodesim's
// simulated nodes share it, so schedd sees the same batches from both.
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

// Backoff is how a node retries a call to schedd: 100ms, doubling to 5s.
func Backoff() *backoff.Exp { return backoff.New(100*time.Millisecond, 5*time.Second) }

// Queue queues container updates and delivers them in order.
type Queue struct {
	send       func(context.Context, api.ContainerReport) error
	log        *slog.Logger
	logUpdates bool

	sendMu sync.Mutex // one flush at a time: keeps order, no double send
	mu     sync.Mutex
	queue  []api.ContainerUpdate
	kick   chan struct{} // buffered 1: something was queued
}

// New returns a queue that delivers with send and warns on log; with
// logUpdates it also logs each update as it is queued.
func New(send func(context.Context, api.ContainerReport) error, log *slog.Logger, logUpdates bool) *Queue {
	return &Queue{send: send, log: log, logUpdates: logUpdates, kick: make(chan struct{}, 1)}
}

// Add queues u; it never blocks.
func (r *Queue) Add(u api.ContainerUpdate) {
	r.mu.Lock()
	r.queue = append(r.queue, u)
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

// Run delivers the queue until ctx ends.
func (r *Queue) Run(ctx context.Context) {
	b := Backoff()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		}
		for r.Pending() > 0 {
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
	return append([]api.ContainerUpdate(nil), r.queue...)
}

// flushOnce sends the head of the queue and drops it once taken.
func (r *Queue) flushOnce(ctx context.Context) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.mu.Lock()
	n := min(len(r.queue), MaxBatch)
	if n == 0 {
		r.mu.Unlock()
		return nil
	}
	batch := append([]api.ContainerUpdate(nil), r.queue[:n]...)
	r.mu.Unlock()
	if err := r.send(ctx, api.ContainerReport{Updates: batch}); err != nil {
		return err
	}
	r.mu.Lock()
	r.queue = r.queue[n:]
	r.mu.Unlock()
	return nil
}
