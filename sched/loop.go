package sched

import (
	"context"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/state"
)

// idlePass bounds how long the loop sleeps without a state change.
const idlePass = 5 * time.Second

// Run schedules until ctx ends: on every state change it hands a snapshot
// and the time to the pure core and commits the plan it returns.
func (s *Server) Run(ctx context.Context) {
	for {
		v := s.st.Snapshot()
		_, ws := v.Index()
		plan := core.Schedule(s.coreSnapshot(v), s.cfg.Clock())
		if !plan.Empty() {
			if _, err := s.apply(ctx, state.Command{Kind: state.CmdPlan, Plan: fromCore(plan)}); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Error("committing plan", "err", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, idlePass)
		select {
		case <-s.kick:
		case <-wctx.Done():
		case <-watch(wctx, ws):
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
	}
}

func watch(ctx context.Context, ws interface{ WatchCtx(context.Context) error }) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		_ = ws.WatchCtx(ctx)
		close(ch)
	}()
	return ch
}

// coreSnapshot is the core's input: nodes that take work and the queue in
// FIFO order (job ids grow with submission).
func (s *Server) coreSnapshot(v *state.Snapshot) core.Snapshot {
	snap := core.Snapshot{Nodes: s.coreNodes(v)}
	for _, j := range v.Jobs() {
		if j.State == api.JobPending {
			snap.Queue = append(snap.Queue, coreJob(j))
		}
	}
	return snap
}

func fromCore(p core.Plan) *state.Plan {
	out := &state.Plan{}
	for _, pl := range p.Placements {
		out.Placements = append(out.Placements, state.Placement{JobID: pl.JobID, Nodes: pl.Nodes})
	}
	for _, r := range p.Reasons {
		out.Reasons = append(out.Reasons, state.Reason{JobID: r.JobID, Reason: r.Reason})
	}
	return out
}
