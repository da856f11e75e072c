package state

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-memdb"
)

// Drain is badmin drain (or, with Resume, badmin resume) as the log
// carries it: By is the admin who asked.
type Drain struct {
	Nodes  []string `json:"nodes"`
	Reason string   `json:"reason,omitempty"`
	By     string   `json:"by,omitempty"`
	Resume bool     `json:"resume,omitempty"`
}

// drain marks the nodes drained (or resumes them). Every node must exist,
// or nothing changes. Running jobs go on; the scheduler places nothing
// new on a drained node.
func drain(txn *memdb.Txn, now time.Time, d *Drain) error {
	if d == nil || len(d.Nodes) == 0 {
		return errors.New("drain without nodes")
	}
	if !d.Resume && d.Reason == "" {
		return errors.New("drain without a reason")
	}
	for _, name := range d.Nodes {
		raw, err := txn.First(tableNodes, "id", name)
		if err != nil {
			return err
		}
		if raw == nil {
			return fmt.Errorf("node %q: %w", name, ErrNotFound)
		}
		n := *raw.(*Node)
		if d.Resume {
			n.Drain, n.Reason, n.DrainedBy, n.DrainedAt = false, "", "", time.Time{}
		} else {
			n.Drain, n.Reason, n.DrainedBy, n.DrainedAt = true, d.Reason, d.By, now
		}
		if err := txn.Insert(tableNodes, &n); err != nil {
			return err
		}
	}
	return nil
}

// keepDrain carries a node's drain over a re-registration: a nodelet
// that restarts does not undo badmin drain, nor its health check's
// (the verdict its next heartbeat carries decides that one).
func keepDrain(n *Node, old *Node) {
	n.Drain, n.Reason, n.DrainedBy, n.DrainedAt = old.Drain, old.Reason, old.DrainedBy, old.DrainedAt
	n.Health, n.HealthAt = old.Health, old.HealthAt
}
