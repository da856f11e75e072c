package sched

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched/fault"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// attachAnswer bounds how long a client's attach waits for the nodelet
// to connect its end.
var attachAnswer = 15 * time.Second

// attachHub pairs the two halves of a terminal attach (bsub -I,
// battach): the client's upgraded request, held until the nodelet of the
// container, told through its attach long-poll, connects its own
// upgraded request for the same id; then schedd splices the two.
// Leader-local: nothing of it is replicated.
type attachHub struct {
	mu      sync.Mutex
	queued  map[string][]api.AttachRequest // by node: not yet fetched
	wake    map[string]chan struct{}       // by node: closed when one is queued
	waiting map[string]*attachWait         // by request id: until the nodelet connects
}

type attachWait struct {
	node string
	conn chan net.Conn // the nodelet's hijacked connection
}

// init makes the maps on first use (the zero hub is ready). h.mu is held.
func (h *attachHub) init() {
	if h.queued == nil {
		h.queued, h.wake, h.waiting = map[string][]api.AttachRequest{}, map[string]chan struct{}{}, map[string]*attachWait{}
	}
}

// request queues req for node and returns what the client waits on.
func (h *attachHub) request(node string, req api.AttachRequest) *attachWait {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.init()
	w := &attachWait{node: node, conn: make(chan net.Conn, 1)}
	h.waiting[req.ID] = w
	h.queued[node] = append(h.queued[node], req)
	if ch, ok := h.wake[node]; ok {
		close(ch)
		delete(h.wake, node)
	}
	return w
}

// forget drops request id (answered, or given up on).
func (h *attachHub) forget(node, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.waiting, id)
	q := h.queued[node]
	for i, r := range q {
		if r.ID == id {
			h.queued[node] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
}

// take returns node's queued requests, or a channel closed when one comes.
func (h *attachHub) take(node string) ([]api.AttachRequest, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.init()
	if q := h.queued[node]; len(q) > 0 {
		delete(h.queued, node)
		return q, nil
	}
	ch, ok := h.wake[node]
	if !ok {
		ch = make(chan struct{})
		h.wake[node] = ch
	}
	return nil, ch
}

// claim returns the wait of request id from node, removing it.
func (h *attachHub) claim(node, id string) *attachWait {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.waiting[id]
	if w == nil || w.node != node {
		return nil
	}
	delete(h.waiting, id)
	return w
}

// Attach connects the caller (from ctx, as the API's handlers see it) to
// the terminal of job id's container host ("": main1): the stream of
// attach frames (internal/attach) from the container's nodelet, once it
// has connected. The caller must own the job or be an admin, as for
// battach; only the leader serves terminals. It fails when ctx ends
// first, and with fault.ErrTooMany past a cap on open streams (closing
// the connection frees its place). The web page's terminal (sched/web) comes through here.
func (s *sessions) Attach(ctx context.Context, id uint64, host string) (net.Conn, error) {
	if !s.IsLeader() {
		return nil, fmt.Errorf("%w: terminals are served by the leader (%s)", raftlog.ErrNotLeader, s.leaderAPI())
	}
	if host == "" {
		host = jobspec.RoleMain + "1"
	}
	j := s.st.Snapshot().Job(id)
	if j == nil {
		return nil, fmt.Errorf("job %d: %w", id, state.ErrNotFound)
	}
	if err := mayControl(ctx, j, doAttach); err != nil {
		return nil, err
	}
	node, err := attachable(j, host)
	if err != nil {
		return nil, err
	}
	// The stream holds two of schedd's open files (the caller's
	// connection and the nodelet's) until it closes: capped per job, per
	// user and in all (streams.go).
	release, err := s.takeStream(ctx, id)
	if err != nil {
		return nil, err
	}
	req := api.AttachRequest{ID: auth.NewID(), JobID: id, Host: host, Run: j.Requeues}
	wait := s.attach.request(node, req)
	defer s.attach.forget(node, req.ID)
	timer := time.NewTimer(attachAnswer)
	defer timer.Stop()
	select {
	case nc := <-wait.conn:
		s.log.Info("terminal attached", "job", id, "host", host, "node", node)
		return &releasingConn{Conn: nc, release: release}, nil
	case <-timer.C:
		release()
		return nil, fmt.Errorf("%w: node %s did not connect job %d's terminal within %s", fault.ErrUnavailable, node, id, attachAnswer)
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// attachable checks that j's container host has a terminal to attach to
// now, and returns its node.
func attachable(j *state.Job, host string) (string, error) {
	if !j.Interactive {
		return "", fmt.Errorf("%w: job %d is not interactive (submit it with bsub -I); bpeek shows its output", state.ErrConflict, j.ID)
	}
	if host != jobspec.RoleMain+"1" {
		return "", fmt.Errorf("%w: only main1 has a terminal, not %q", ErrInvalid, host)
	}
	if j.State.Terminal() {
		return "", fmt.Errorf("%w: job %d has ended (%s)", state.ErrEnded, j.ID, j.State)
	}
	for _, c := range j.Containers {
		if c.Host != host {
			continue
		}
		if c.State != api.ContainerRunning || c.Node == "" {
			return "", fmt.Errorf("%w: job %d is %s; its terminal opens once main1 runs", state.ErrConflict, j.ID, j.State)
		}
		return c.Node, nil
	}
	return "", fmt.Errorf("%w: job %d has no container %s", ErrInvalid, j.ID, host)
}

// AttachRequests are node's attach requests, waiting up to wait for one
// (none when wait or ctx ends first).
func (s *sessions) AttachRequests(ctx context.Context, node string, wait time.Duration) []api.AttachRequest {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		reqs, ch := s.attach.take(node)
		if len(reqs) > 0 {
			return reqs
		}
		select {
		case <-ch:
		case <-timer.C:
			return []api.AttachRequest{}
		case <-ctx.Done():
			return []api.AttachRequest{}
		}
	}
}

// AttachConnect claims node's attach request id: deliver hands the
// nodelet's connection to the client waiting for it.
func (s *sessions) AttachConnect(node, id string) (deliver func(net.Conn), err error) {
	wait := s.attach.claim(node, id)
	if wait == nil {
		return nil, fmt.Errorf("attach request %s: %w (the client gave up)", id, state.ErrNotFound)
	}
	return func(c net.Conn) { wait.conn <- c }, nil
}
