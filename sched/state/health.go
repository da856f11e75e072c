package state

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// HealthCheckBy is who a node's health-check drain is by, as node lists
// show it (DrainedBy) while no admin drain is in force.
const HealthCheckBy = "healthcheck"

// Health is a node's health-check verdict (the leader proposes one when
// a nodelet's heartbeat carries a verdict other than the one its row
// holds). Requeue lists the partitions that requeue their jobs, read by
// the leader from the config it proposes under (as NodesDown's), so
// every replica decides alike. The act is new in schema 11 and has no
// form in older ones: the leader proposes none while the cluster's
// schema is older (HealthReports).
type Health struct {
	Node string `json:"node"`
	OK   bool   `json:"ok"`
	// Reason is the failing check's first line; "" with OK.
	Reason  string   `json:"reason,omitempty"`
	Requeue []string `json:"requeue_partitions,omitempty"`
}

// Kind names the act in the log.
func (Health) Kind() string { return CmdHealth }

// HealthReports says whether a leader writing entries of schema version
// v (the oldest its peers read) may propose health verdicts (Health, 11
// on): while a peer of an older release is in the cluster (a rolling
// upgrade) it proposes none, as that peer could not read the entry; the
// raft log refuses one too (NeedsSchema).
func HealthReports(v int) bool { return v >= commandSchema }

// health records a node's verdict. A failing node is drained by its
// health check (Node.Health, apart from an admin's Drain, so that each
// lifts on its own): the scheduler places nothing new there. On the
// verdict that turns it unhealthy, every job with a live container there
// that asked to be requeued (or whose partition requeues) goes back to
// the queue at once, a new run, with the node added to its ExcludeNodes
// so that its next placement avoids it; other jobs keep running, as
// under an admin's drain. A passing verdict lifts the health-check drain
// alone: an admin's drain stays.
func health(txn *memdb.Txn, index uint64, now time.Time, h Health) error {
	if h.Node == "" {
		return errors.New("health verdict without a node")
	}
	if !h.OK && h.Reason == "" {
		return errors.New("failing health verdict without a reason")
	}
	raw, err := txn.First(tableNodes, "id", h.Node)
	if err != nil {
		return err
	}
	if raw == nil {
		return fmt.Errorf("node %q: %w", h.Node, ErrNotFound)
	}
	n := *raw.(*Node)
	turned := !h.OK && n.Health == ""
	if h.OK {
		n.Health, n.HealthAt = "", time.Time{}
	} else {
		if turned {
			n.HealthAt = now
		}
		n.Health = h.Reason
	}
	if err := txn.Insert(tableNodes, &n); err != nil {
		return err
	}
	if !turned {
		return nil
	}
	return healthRequeue(txn, index, now, h)
}

// healthRequeue puts back in the queue the requeue jobs with a live
// container on the node h failed, in id order, excluding the node.
func healthRequeue(txn *memdb.Txn, index uint64, now time.Time, h Health) error {
	it, err := txn.Get(tableJobs, "node", h.Node)
	if err != nil {
		return err
	}
	var hit []*Job
	for raw := it.Next(); raw != nil; raw = it.Next() {
		j := raw.(*Job)
		if j.State == lifecycle.JobPending || j.State == lifecycle.JobHeld || j.State.Terminal() || j.Cancelled || j.TimedOut || j.KillWanted {
			continue
		}
		if !j.Spec.Requeue && !slices.Contains(h.Requeue, j.Partition) {
			continue
		}
		if slices.ContainsFunc(j.Containers, func(c Container) bool { return c.Node == h.Node && !c.State.Ended() }) {
			hit = append(hit, j)
		}
	}
	slices.SortFunc(hit, func(a, b *Job) int { return cmp.Compare(a.ID, b.ID) })
	for _, old := range hit {
		j := clone(old)
		j.ModifyIndex = index
		requeueJob(j, now, nil, fmt.Sprintf("requeued: node %s failed its health check: %s", h.Node, h.Reason), true)
		if !slices.Contains(j.ExcludeNodes, h.Node) {
			j.ExcludeNodes = append(slices.Clip(j.ExcludeNodes), h.Node)
		}
		if err := txn.Insert(tableJobs, j); err != nil {
			return err
		}
	}
	return nil
}
