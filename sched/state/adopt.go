package state

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// adopt applies u, node's update, to j when j is queued (PENDING or
// HELD) and u is about j's own session and current run: the job ran on
// node after the backup this state was restored from (the backup shows
// it queued), and the node still runs it or ran it. It reports whether
// it took u (j changed); false leaves u to the ordinary report path,
// which drops it.
//
//   - Running, the container unplaced (or already adopted by node): the
//     container is placed on node, running. Once every container of
//     the job is, the job is RUNNING, from the node's start of the
//     container that completed it (start: the earliest start this
//     report gave for the job's containers).
//   - Ended: the job ran there and must not run twice: it ends FAILED
//     with a reason that says so, or, asked to be requeued (requeue =
//     true), is queued again as its next run.
func adopt(txn *memdb.Txn, j *Job, node string, u ContainerUpdate, now time.Time, start map[uint64]time.Time) bool {
	if (j.State != lifecycle.JobPending && j.State != lifecycle.JobHeld) || u.Session == "" || u.Session != j.SessionID || u.Requeues != j.Requeues {
		return false
	}
	i := -1
	for k := range j.Containers {
		if j.Containers[k].Host == u.Host {
			i = k
		}
	}
	if i < 0 {
		return false
	}
	c := &j.Containers[i]
	if (c.Node != "" && c.Node != node) || c.State.Ended() {
		return false
	}
	switch {
	case u.State == lifecycle.ContainerRunning:
		c.Node, c.State, c.ExitCode, c.Message = node, lifecycle.ContainerRunning, 0, ""
		if raw, _ := txn.First(tableNodes, "id", node); raw != nil {
			c.NodeAddr = raw.(*Node).Addr
		}
		if u.Reach != "" {
			c.Reach = u.Reach
		}
		at := nodeTime(j, u.At, now)
		if s, ok := start[j.ID]; !ok || at.Before(s) {
			start[j.ID] = at
		}
		for _, o := range j.Containers {
			if o.Node == "" || o.State != lifecycle.ContainerRunning {
				return true // more to adopt
			}
		}
		j.State, j.Reason, j.Started = lifecycle.JobRunning, "", start[j.ID]
		return true
	case u.State.Ended():
		why := fmt.Sprintf("it ran on node %s after the backup this state was restored from", node)
		if u.State == lifecycle.ContainerKilled {
			why += "; stopped at the restore, not run twice"
		} else {
			why += fmt.Sprintf("; it ended there (%s, exit %d), not run again", u.State, u.ExitCode)
		}
		c.Node, c.State, c.ExitCode, c.Message = node, u.State, u.ExitCode, u.Message
		c.Ended = nodeTime(j, u.At, now)
		addUsage(j, c, u)
		if j.Spec.Requeue {
			requeueJob(j, now, nil, why, true)
			return true
		}
		for k := range j.Containers {
			if o := &j.Containers[k]; !o.State.Ended() {
				o.State, o.Message = lifecycle.ContainerKilled, "stopped: "+why
			}
		}
		j.State, j.Reason, j.KillWanted, j.Ended = lifecycle.JobFailed, why, true, lastEnd(j, now)
		if j.ExitCode = u.ExitCode; j.ExitCode == 0 {
			j.ExitCode = 1
		}
		return true
	}
	return false
}

// adopting tells whether queued j has a container a node reported
// running (adopt) and waits for the rest: it is not placed again.
func adopting(j *Job) bool {
	if j.State != lifecycle.JobPending && j.State != lifecycle.JobHeld {
		return false
	}
	for _, c := range j.Containers {
		if c.Node != "" {
			return true
		}
	}
	return false
}

// Adopting tells whether queued j has a container a node runs that the
// state adopted (see adopt), the others not yet: the scheduler places
// it not.
func (j *Job) Adopting() bool { return adopting(j) }
