package sched

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/fault"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// The leader's part in gang suspension and warning signals (see
// sched/state/suspend.go): each pass sends the warnings that are due
// (state.Warn) and resumes the suspended jobs asked to resume whose CPUs
// and GPUs are free again on their nodes (state.Resumed). Neither is
// written while a schedd of the previous release is in the cluster (a
// rolling upgrade): the pass defers them until it has left. Both are the
// loop's, one pass after another, so that a resume never takes what a
// plan of the same moment gives to another job.

// warnNow sends the warning signal of the jobs in ids that ask for one
// and have not had it this run, now (why: "walltime"). A preemption's
// victims get theirs in the plan's own entry instead (state's preempt),
// delivered by their nodelets ahead of the stop.
// While the cluster's schema is older than the act's it sends nothing
// and answers an error that is raftlog.ErrOlderPeer.
func (s *scheduler) warnNow(ctx context.Context, ids []uint64, why string) error {
	if len(ids) == 0 {
		return nil
	}
	act := state.Warn{Jobs: ids, Why: why}
	if err := s.writable(act); err != nil {
		return err
	}
	_, err := s.apply(ctx, state.Command{Act: act})
	return err
}

// writable refuses act while the cluster's schema is older than the
// first one whose entries carry it (state.Command.NeedsSchema): a
// schedd of the previous release, in the middle of a rolling upgrade,
// would stop at an entry it cannot read. The error is a conflict
// (state.ErrConflict) and raftlog.ErrOlderPeer, as the raft log's own
// refusal.
func (s *replica) writable(act state.Act) error {
	need := (&state.Command{Act: act}).NeedsSchema()
	if s.raft == nil || need == 0 {
		return nil
	}
	if have := s.raft.WriteSchema(); have < need {
		return fmt.Errorf("%w: %w: %s needs every schedd of the cluster to read schema %d, and one reads %d only; finish the rolling upgrade first",
			fault.ErrConflict, raftlog.ErrOlderPeer, act.Kind(), need, have)
	}
	return nil
}

// resumable lists the suspended jobs asked to resume whose containers
// fit again on their nodes (CPUs, and GPU devices by their own shares;
// their memory they still hold), longest suspended first: each one
// found takes its room before the next is tried. open is the nodes that
// take work, empty (the node cache's); a job on a node not among them
// stays suspended, and so does a job suspended by preemption while its
// preemptor still waits to be placed (preemptorPending).
func resumable(v *state.Snapshot, open []core.Node) []uint64 {
	sus := v.Suspended()
	if len(sus) == 0 {
		return nil
	}
	nodes := map[string]*core.Node{}
	free := coreNodes(open, v.LiveJobs())
	for i := range free {
		nodes[free[i].Name] = &free[i]
	}
	var out []uint64
	for _, j := range sus {
		if !j.Suspended.ResumeWanted || j.KillWanted || preemptorPending(v, j) {
			continue
		}
		need := map[string]core.Res{}
		devs := map[string]map[int]float64{}
		fits := true
		for _, c := range j.Containers {
			if c.Node == "" || c.State.Ended() {
				continue
			}
			if nodes[c.Node] == nil {
				fits = false
				break
			}
			r := toCore(c.Res())
			need[c.Node] = need[c.Node].Add(core.Res{CPUMilli: r.CPUMilli, GPU: r.GPU})
			for _, g := range c.GPUs {
				if devs[c.Node] == nil {
					devs[c.Node] = map[int]float64{}
				}
				devs[c.Node][g.Device] += g.Share
			}
		}
		for name, r := range need {
			n := nodes[name]
			if !fits || !n.Free.Covers(r) || !devicesFree(n, devs[name]) {
				fits = false
				break
			}
		}
		if !fits {
			continue
		}
		for name, r := range need {
			n := nodes[name]
			n.Free = n.Free.Sub(r)
			for d := range n.Devices {
				n.Devices[d].Free -= devs[name][n.Devices[d].ID]
			}
		}
		out = append(out, j.ID)
	}
	return out
}

// preemptorPending reports whether suspended job j was preempted by a
// job that is still waiting to be placed on the CPUs and GPUs j lent
// it: j stays suspended until that job holds them (and resumes when it
// gives them back), is held, or is gone.
func preemptorPending(v *state.Snapshot, j *state.Job) bool {
	by := j.ResumeWaitsOn()
	if by == 0 {
		return false
	}
	p := v.Job(by)
	return p != nil && p.State == api.JobPending
}

// devicesFree reports whether n's GPU devices have the shares want asks
// of each free.
func devicesFree(n *core.Node, want map[int]float64) bool {
	for id, share := range want {
		ok := false
		for _, d := range n.Devices {
			if d.ID == id && d.Free+1e-9 >= share {
				ok = true
			}
		}
		if !ok && len(n.Devices) > 0 {
			return false
		}
	}
	return true
}

// suspendPass commits what a pass owes the suspended and warned jobs:
// the warnings due at now, then the resumes that fit. It answers
// whether it committed anything (the pass then ends there), false with
// an error when a commit failed, and when the next warning is due. While
// the cluster's schema is older than its acts' it does nothing.
func (s *scheduler) suspendPass(ctx context.Context, v *state.Snapshot, now time.Time) (committed bool, next time.Time, err error) {
	due, next := v.Warnings(now)
	if s.writable(state.Warn{}) != nil {
		return false, time.Time{}, nil // deferred: the pass after the upgrade sends what is due then
	}
	if len(due) > 0 {
		if err := s.warnNow(ctx, due, "walltime"); err != nil {
			return false, next, err
		}
		return true, next, nil
	}
	if ids := resumable(v, s.nodes.open(v)); len(ids) > 0 {
		if _, err := s.apply(ctx, state.Command{Act: state.Resumed{Jobs: ids}}); err != nil {
			return false, next, err
		}
		return true, next, nil
	}
	return false, next, nil
}
