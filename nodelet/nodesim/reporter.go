package nodesim

import (
	"context"
	"sync"

	"github.com/troupe-hpc/troupe/internal/api"
)

// maxBatch caps the updates sent in one report, as nodelet's.
const maxBatch = 256

// reporter queues a node's container updates and delivers them in
// order, one report at a time, retrying until schedd takes them: what
// nodelet's reporter does, so that schedd sees the same batches.
type reporter struct {
	n      *node
	sendMu sync.Mutex // one flush at a time: keeps order, no double send
	mu     sync.Mutex
	queue  []api.ContainerUpdate
	kick   chan struct{} // buffered 1: something was queued
}

func newReporter(n *node) *reporter {
	return &reporter{n: n, kick: make(chan struct{}, 1)}
}

// add queues u; it never blocks.
func (r *reporter) add(u api.ContainerUpdate) {
	r.mu.Lock()
	r.queue = append(r.queue, u)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run delivers the queue until ctx ends.
func (r *reporter) run(ctx context.Context) {
	b := newBackoff()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		}
		for r.pending() > 0 {
			if err := r.flushOnce(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				r.n.sim.log.Warn("report not taken, retrying", "node", r.n.name, "err", err, "queued", r.pending())
				if b.Wait(ctx) != nil {
					return
				}
				continue
			}
			b.Reset()
		}
	}
}

// drain delivers what is queued, retrying until ctx ends.
func (r *reporter) drain(ctx context.Context) error {
	b := newBackoff()
	for r.pending() > 0 {
		if err := r.flushOnce(ctx); err != nil {
			if b.Wait(ctx) != nil {
				return err
			}
		}
	}
	return nil
}

func (r *reporter) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

// flushOnce sends the head of the queue and drops it once taken.
func (r *reporter) flushOnce(ctx context.Context) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.mu.Lock()
	n := min(len(r.queue), maxBatch)
	if n == 0 {
		r.mu.Unlock()
		return nil
	}
	batch := append([]api.ContainerUpdate(nil), r.queue[:n]...)
	r.mu.Unlock()
	if err := r.n.cli.Load().Report(ctx, r.n.name, api.ContainerReport{Updates: batch}); err != nil {
		return err
	}
	r.mu.Lock()
	r.queue = r.queue[n:]
	r.mu.Unlock()
	return nil
}
