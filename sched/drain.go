package sched

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/reason"
	"github.com/troupe-hpc/troupe/sched/state"
)

// Node drain (badmin drain/resume, LSF hclose/hopen, Slurm scontrol
// update state=drain). The drain is a raft command on the node's record,
// so it survives schedd restarts and the nodelet's re-registration. The
// scheduler's node list leaves drained nodes out (nodeCache.open); the
// jobs running there go on. Listings derive DRAINING (jobs still run)
// or DRAINED (empty) when they answer.

// maxReason bounds a drain reason.
const maxReason = 256

// Drain drains d.Nodes with d.Reason, or with d.Resume returns them to
// service; by is who asked. It answers the nodes as listed afterwards.
func (s *fleet) Drain(ctx context.Context, d api.NodeDrain, by string) ([]api.Node, error) {
	d.Reason = strings.TrimSpace(d.Reason)
	switch {
	case len(d.Nodes) == 0:
		return nil, fmt.Errorf("%w: name at least one node", ErrInvalid)
	case !d.Resume && d.Reason == "":
		return nil, fmt.Errorf("%w: draining needs a reason (badmin drain -r REASON)", ErrInvalid)
	case len(d.Reason) > maxReason || strings.ContainsAny(d.Reason, "\n\r"):
		return nil, fmt.Errorf("%w: a drain reason is one line of at most %d characters", ErrInvalid, maxReason)
	}
	v := s.st.Snapshot()
	var unknown []string
	for _, n := range d.Nodes {
		if v.Node(n) == nil {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		var known []string
		for _, n := range v.Nodes() {
			known = append(known, n.Name)
		}
		return nil, fmt.Errorf("%w: unknown node %s; known nodes: %s", ErrInvalid, strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	cmd := &state.Drain{Nodes: d.Nodes, Reason: d.Reason, By: by, Resume: d.Resume}
	if d.Resume {
		cmd.Reason = ""
	}
	if _, err := s.apply(ctx, state.Command{Act: state.DrainNodes{Drain: cmd}}); err != nil {
		return nil, err
	}
	s.wake()
	var out []api.Node
	for _, n := range s.NodeView(s.st.Snapshot()) {
		if slices.Contains(d.Nodes, n.Name) {
			out = append(out, n)
		}
	}
	return out, nil
}

// NodeView is the node list as bhosts shows it: Nodes with the state
// derived from the drain (DRAINING while live containers hold anything
// there, DRAINED once empty), the reason of a drained or DOWN node, and
// the partitions each belongs to now.
func (s *fleet) NodeView(v *state.Snapshot) []api.Node {
	cfg := v.Config()
	nodes := s.Nodes(v)
	for i := range nodes {
		n := &nodes[i]
		n.Instance = "" // a nodelet's own; not for the node list
		for k := range cfg.Partitions {
			if p := &cfg.Partitions[k]; p.Has(n.Name, n.Labels) {
				n.Partitions = append(n.Partitions, p.Name)
			}
		}
		switch {
		case n.State == api.NodeDown && !n.Drain:
			n.Reason = reason.NotResponding
		case n.State == api.NodeUp && n.Drain && n.Allocated != (api.Resources{}):
			n.State = api.NodeDraining
		case n.State == api.NodeUp && n.Drain:
			n.State = api.NodeDrained
		}
	}
	reserveNodes(v, nodes, s.cfg.Clock())
	return nodes
}
