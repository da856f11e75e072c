package sched

import (
	"context"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// DefaultNodeTimeout is how long a node may stay silent before the
// leader declares it DOWN.
const DefaultNodeTimeout = 30 * time.Second

// A nodelet's lease and heartbeat derive from the node timeout T:
// it heartbeats every T/leaseHeartbeats and may run its containers for
// T/2 after sending a heartbeat schedd answered (its lease); then its
// fence stops them (nodelet(8), FENCING). A node is declared DOWN, and
// its jobs requeued, only after T of silence: at least T/2 after its
// lease ran out, the margin for the fence's kill, a leader change and
// clock rates. Four heartbeats fit in a lease, so one or two lost ones
// do not fence a healthy node.
const leaseHeartbeats = 8

// Lease is what schedd announces to nodelets for node timeout timeout.
func Lease(timeout time.Duration) api.NodeLease {
	return api.NodeLease{Lease: timeout / 2, Heartbeat: timeout / leaseHeartbeats, NodeTimeout: timeout}
}

// Heartbeat notes that a node is alive. A node the state holds DOWN is
// brought UP again through raft: it gets its assignments, which no longer
// hold the jobs that were failed or requeued, and stops what it still
// runs of them.
func (s *Server) Heartbeat(ctx context.Context, node string) error {
	s.mu.Lock()
	s.seen[node] = s.cfg.Clock()
	s.mu.Unlock()
	if n := s.st.Snapshot().Node(node); n != nil && n.State == api.NodeDown {
		if _, err := s.apply(ctx, state.Command{Kind: state.CmdNodeUp, NodeUp: node}); err != nil {
			return err
		}
		s.log.Info("node back up", "node", node)
		s.wake()
	}
	return nil
}

// silentNodes lists the UP nodes not heard from within the node timeout
// at now. A node this server has never heard from counts from the time
// this server started leading (s.leadSince), so a new leader gives every
// node a full timeout to find it.
func (s *Server) silentNodes(v *state.Snapshot, now time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range v.Nodes() {
		if n.State != api.NodeUp {
			continue
		}
		last, ok := s.seen[n.Name]
		if !ok || last.Before(s.leadSince) {
			last = s.leadSince
		}
		if now.Sub(last) > s.cfg.NodeTimeout {
			out = append(out, n.Name)
		}
	}
	return out
}

// failNodes commits the DOWN verdict for nodes, with the partitions that
// requeue their jobs.
func (s *Server) failNodes(ctx context.Context, v *state.Snapshot, nodes []string) error {
	d := &state.NodeDown{Nodes: nodes}
	for _, p := range v.Config().Partitions {
		if p.Requeue {
			d.Requeue = append(d.Requeue, p.Name)
		}
	}
	s.log.Warn("nodes silent past the node timeout: marking them DOWN", "nodes", nodes, "timeout", s.cfg.NodeTimeout)
	_, err := s.apply(ctx, state.Command{Kind: state.CmdNodeDown, NodeDown: d})
	return err
}
