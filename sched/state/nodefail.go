package state

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
	"github.com/troupe-hpc/troupe/internal/reason"
)

// NodeDown is the leader's finding that nodes went silent past the node
// timeout (CmdNodeDown). Requeue lists the partitions that requeue their
// jobs; the leader reads them from the config it proposes under, so every
// replica decides alike.
type NodeDown struct {
	Nodes   []string `json:"nodes"`
	Requeue []string `json:"requeue_partitions,omitempty"`
}

// nodeDown marks the nodes DOWN and ends every job that holds a live
// container on one of them: NODE_FAIL, or back to PENDING (containers
// reset, Requeues counted) when the job or its partition asks for
// requeue. Containers of such a job on other nodes leave those nodes'
// assignments, so their nodelets stop them; their resources are free at
// once (Allocated counts only live containers of live jobs).
func nodeDown(txn *memdb.Txn, index uint64, now time.Time, d *NodeDown, runs bool) error {
	if d == nil || len(d.Nodes) == 0 {
		return errors.New("node down without nodes")
	}
	down := map[string]bool{}
	for _, name := range d.Nodes {
		raw, err := txn.First(tableNodes, "id", name)
		if err != nil {
			return err
		}
		if raw == nil {
			continue
		}
		n := *raw.(*Node)
		if n.State == lifecycle.NodeDown {
			continue
		}
		n.State = lifecycle.NodeDown
		if err := txn.Insert(tableNodes, &n); err != nil {
			return err
		}
		down[name] = true
	}
	requeue := map[string]bool{}
	for _, p := range d.Requeue {
		requeue[p] = true
	}
	// The down nodes' live jobs, by the node index, in id order.
	var hit []*Job
	seen := map[uint64]bool{}
	for name := range down {
		it, err := txn.Get(tableJobs, "node", name)
		if err != nil {
			return err
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			j := raw.(*Job)
			if seen[j.ID] || j.State == lifecycle.JobPending || j.State == lifecycle.JobHeld {
				continue
			}
			for _, c := range j.Containers {
				if down[c.Node] && !c.State.Ended() {
					hit = append(hit, j)
					seen[j.ID] = true
					break
				}
			}
		}
	}
	slices.SortFunc(hit, func(a, b *Job) int { return cmp.Compare(a.ID, b.ID) })
	for _, old := range hit {
		j := clone(old)
		var failed string
		for _, c := range j.Containers {
			if down[c.Node] && !c.State.Ended() {
				failed = c.Node
				break
			}
		}
		j.ModifyIndex = index
		if (j.Spec.Requeue || requeue[j.Partition]) && !j.Cancelled && !j.TimedOut {
			requeueJob(j, now, down, fmt.Sprintf("requeued: node %s failed", failed), runs)
		} else {
			j.State, j.Ended, j.KillWanted = lifecycle.JobNodeFail, now, true
			j.Reason = fmt.Sprintf("node %s failed (no heartbeat)", failed)
			if j.ExitCode == 0 {
				j.ExitCode = 1
			}
			loseContainers(j, down)
		}
		if err := txn.Insert(tableJobs, j); err != nil {
			return err
		}
	}
	return nil
}

// loseContainers marks the containers of j that were live on a down
// node failed (lost): nothing reports on them any more, and the node's
// fence has stopped them (nodelet(8), FENCING). Containers on live
// nodes stay as they are until their nodelets report them killed.
func loseContainers(j *Job, down map[string]bool) {
	for i := range j.Containers {
		c := &j.Containers[i]
		if down[c.Node] && !c.State.Ended() {
			c.Message = fmt.Sprintf("lost: node %s failed (no heartbeat) while it was %s", c.Node, c.State)
			c.State = lifecycle.ContainerFailed
		}
	}
}

// requeueJob puts j back in the queue as if just submitted (its id,
// submit time and kernel ids kept): every container unplaced. With runs
// (nodeRuns), the run it ends is kept in j.Runs, ended at now: its
// containers on the down nodes lost, those elsewhere stopped by their
// nodelets (whose reports on that run schedd no longer takes); and the
// next run starts with no usage. Without, no run is kept and the usage
// goes on into the next run, as entries of an older schema applied.
func requeueJob(j *Job, now time.Time, down map[string]bool, why string, runs bool) {
	if runs {
		keepRun(j, now, down, why)
	}
	j.State, j.Reason = lifecycle.JobPending, reason.Waiting(false, false, false) // its dependencies were met when it started
	j.Requeues++
	j.LastRequeue = why
	newRun(j)
	j.KillWanted, j.ExitCode = false, 0
	j.Started, j.Ended = time.Time{}, time.Time{}
	for i := range j.Containers {
		c := &j.Containers[i]
		c.Node, c.NodeAddr, c.Reach, c.GPUs = "", "", "", nil
		c.State, c.ExitCode, c.Message = lifecycle.ContainerPending, 0, ""
		if runs {
			c.CPUTime, c.MemPeak, c.Ended = 0, 0, time.Time{}
		}
	}
}

// keepRun appends j's current run, ended at now by a requeue for why, to
// j.Runs and clears its usage for the next run. Runs[i] is run i: when an
// earlier run is missing (requeued by an entry of an older schema, or a
// restore took the job's run number from the accounting store), no run
// is kept, so none is recorded under another run's number; the job's
// last run is still recorded when it ends.
func keepRun(j *Job, now time.Time, down map[string]bool, why string) {
	defer func() { j.CPUTime, j.MemPeak = 0, 0 }()
	if len(j.Runs) != j.Requeues {
		return
	}
	run := Run{Started: j.Started, Ended: now, Reason: why, ExitCode: j.ExitCode, CPUTime: j.CPUTime, MemPeak: j.MemPeak}
	for _, c := range j.Containers {
		h := RunContainer{Host: c.Host, Node: c.Node, State: c.State, ExitCode: c.ExitCode, Message: c.Message,
			CPUTime: c.CPUTime, MemPeak: c.MemPeak, Ended: c.Ended}
		switch {
		case c.State.Ended():
		case down[c.Node]:
			h.State = lifecycle.ContainerFailed
			h.Message = fmt.Sprintf("lost: node %s failed (no heartbeat) while it was %s", c.Node, c.State)
		case c.Node != "":
			h.State, h.Message = lifecycle.ContainerKilled, "stopped: "+why
		}
		run.Containers = append(run.Containers, h)
	}
	j.Runs = append(slices.Clip(j.Runs), run)
}

// nodeUp marks a DOWN node UP again (it heartbeats or asks for its
// assignments after the leader declared it down).
func nodeUp(txn *memdb.Txn, name string) error {
	raw, err := txn.First(tableNodes, "id", name)
	if err != nil {
		return err
	}
	if raw == nil {
		return fmt.Errorf("node %q: %w", name, ErrNotFound)
	}
	n := *raw.(*Node)
	if n.State == lifecycle.NodeUp {
		return nil
	}
	n.State = lifecycle.NodeUp
	return txn.Insert(tableNodes, &n)
}
