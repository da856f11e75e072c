package sched

import (
	"context"
	"errors"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// Node health checks. A nodelet runs the site's health program (LBNL NHC
// or any script: exit 0 healthy, else its first line is why) and its own
// checks on an interval, and carries the verdict on its heartbeats. The
// leader commits a verdict only when it differs from the node's row
// (state.Health): a failing one drains the node by its health check (apart
// from an admin's drain) and requeues the requeue jobs running there; a
// passing one lifts that drain alone.

// nodeHealth commits node's verdict h when it changes what the state
// holds. A cluster still in an older schema (a rolling upgrade) takes
// none: the act has no form its older peers read. The verdict is put
// off, not lost: the node's next heartbeat carries it again, and the
// first after the upgrade commits it.
func (s *fleet) nodeHealth(ctx context.Context, node string, h api.NodeHealth) error {
	v := s.st.Snapshot()
	n := v.Node(node)
	if n == nil {
		return nil
	}
	reason := ""
	if !h.OK {
		reason = healthReason(h.Reason)
	}
	if reason == n.Health {
		return nil
	}
	if schema := s.raft.WriteSchema(); !state.HealthReports(schema) {
		if !h.OK {
			s.log.Warn("node failed its health check: not drained while a peer reads an older schema than the health checks' (a rolling upgrade)",
				"node", node, "reason", reason, "schema", schema)
		}
		return nil
	}
	cmd := state.Health{Node: node, OK: h.OK, Reason: reason}
	if !h.OK {
		for _, p := range v.Config().Partitions {
			if p.Requeue {
				cmd.Requeue = append(cmd.Requeue, p.Name)
			}
		}
		s.log.Warn("node failed its health check: draining it", "node", node, "reason", reason)
	} else {
		s.log.Info("node passed its health check again: resuming it", "node", node, "admin_drain", n.Drain)
	}
	if _, err := s.apply(ctx, state.Command{Act: cmd}); errors.Is(err, raftlog.ErrOlderPeer) || errors.Is(err, state.ErrNoOldForm) {
		// A peer of an older release joined since: the same deferral
		// as above.
		s.log.Warn("node health verdict put off: the cluster still writes an older schema", "node", node, "err", err)
		return nil
	} else if err != nil {
		return err
	}
	s.wake()
	return nil
}

// healthReason is a failing verdict's reason as a node row keeps it: one
// line of at most maxReason bytes, never empty.
func healthReason(r string) string {
	if i := strings.IndexAny(r, "\r\n"); i >= 0 {
		r = r[:i]
	}
	r = strings.TrimSpace(r)
	if len(r) > maxReason {
		r = strings.ToValidUTF8(r[:maxReason], "")
	}
	if r == "" {
		r = "health check failed"
	}
	return r
}
