package sched

import (
	"context"
	"errors"
	"fmt"
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

// HeartbeatFrom notes that node is alive. A node the state holds DOWN
// is brought UP again through raft: it gets its assignments, which no
// longer hold the jobs that were failed or requeued, and stops what it
// still runs of them. From nodelet instance inst: "" (not told) is
// taken from anyone; another instance than the registered one, while
// that one is live, is refused with ErrNodeTaken and keeps nothing alive.
func (s *fleet) HeartbeatFrom(ctx context.Context, node, inst string) error {
	if inst != "" {
		if err := s.checkInstance(s.st.Snapshot(), node, inst, "heartbeat"); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.seen[node] = s.cfg.Clock()
	s.mu.Unlock()
	if n := s.st.Snapshot().Node(node); n != nil && n.State == api.NodeDown {
		if _, err := s.apply(ctx, state.Command{Act: state.NodeUp{Node: node}}); err != nil {
			return err
		}
		s.log.Info("node back up", "node", node)
		s.wake()
	}
	return nil
}

// ErrNodeTaken marks a registration or heartbeat for a node name that
// another, live nodelet holds. It is a state.ErrConflict (HTTP 409).
var ErrNodeTaken = errors.New("node name in use")

// takenError reads as its message alone and is ErrNodeTaken and
// state.ErrConflict.
type takenError struct{ msg string }

func (e *takenError) Error() string { return e.msg }
func (e *takenError) Is(target error) bool {
	return target == ErrNodeTaken || target == state.ErrConflict
}

// checkInstance refuses what (a registration or heartbeat) of node name
// from nodelet instance inst when the node is registered by another
// instance that is still live: heard from within its lease (Lease), after
// which its fence has stopped its containers. A node that registered without an instance (an older
// nodelet) cannot be told apart and is not defended; a DOWN or silent
// node may be taken over.
func (s *fleet) checkInstance(v *state.Snapshot, name, inst, what string) error {
	n := v.Node(name)
	if n == nil || n.Instance == "" || n.Instance == inst || n.State == api.NodeDown {
		return nil
	}
	now := s.cfg.Clock()
	s.mu.Lock()
	last, ok := s.seen[name]
	if !ok || last.Before(s.leadSince) {
		last = s.leadSince
	}
	s.mu.Unlock()
	// The old instance's lease bounds how long its containers may run
	// (troupe-fence): past it, taking the name over cannot run a job twice.
	silent, live := now.Sub(last), Lease(s.cfg.NodeTimeout).Lease
	if silent > live {
		s.log.Warn("node taken over by another nodelet after the node timeout", "node", name, "silent", silent.Round(time.Second))
		return nil
	}
	return &takenError{fmt.Sprintf("node %s is registered by another nodelet (instance %.8s…), heard from %s ago: %s from instance %.8s… refused; "+
		"two nodelets may not share a name: give this one another --name, or stop the other (a node silent for %s may be taken over)",
		name, n.Instance, silent.Round(time.Millisecond), what, orNone(inst), live)}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// silentNodes lists the UP nodes not heard from within the node timeout
// at now. A node this server has never heard from counts from the time
// this server started leading (s.leadSince), so a new leader gives every
// node a full timeout to find it.
func (s *fleet) silentNodes(v *state.Snapshot, now time.Time) []string {
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
func (s *fleet) failNodes(ctx context.Context, v *state.Snapshot, nodes []string) error {
	d := &state.NodeDown{Nodes: nodes}
	for _, p := range v.Config().Partitions {
		if p.Requeue {
			d.Requeue = append(d.Requeue, p.Name)
		}
	}
	s.log.Warn("nodes silent past the node timeout: marking them DOWN", "nodes", nodes, "timeout", s.cfg.NodeTimeout)
	_, err := s.apply(ctx, state.Command{Act: state.NodesDown{Down: d}})
	return err
}
