package sched

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// restore reconciles d with what schedd knows (reconcileRestore) and
// puts it in force on every replica, with writes held off from the read
// of the live state to the end, so none is lost in between.
func (s *ledger) restore(ctx context.Context, d *state.Dump) error {
	s.restoreMu.Lock()
	defer s.restoreMu.Unlock()
	r, err := s.reconcileRestore(ctx, d)
	if err != nil {
		return err
	}
	var until time.Time
	if s.st.Snapshot().HoldsNoJob() {
		// The nodes kept their containers while the state held no job
		// (api.Assignments.NoJobsYet); jobs the backup shows queued may
		// have started (and ended) since, jobs submitted since may run.
		// The restored state opens an adoption window: every replica
		// holds placements until it ends, while the nodes announce what
		// they run and tell the ends they keep, which the state adopts;
		// placing before would run them twice.
		until = s.cfg.Clock().Add(restorePlaceHold(s.cfg.NodeTimeout))
		state.SetAdoption(d, until, r.Accounted)
	}
	if err := s.raft.Restore(ctx, *d); err != nil {
		return fmt.Errorf("restoring the snapshot: %w", err)
	}
	if !until.IsZero() {
		s.log.Warn("restored into a state that held no job: no placements until the nodes have announced the jobs they run", "until", until)
		s.wake()
	}
	return nil
}

// restorePlaceHold is how long a restore into a state that held no job
// holds placements: two of the nodes' heartbeat intervals (a node
// answers its restored assignments at once, and reports within one).
func restorePlaceHold(nodeTimeout time.Duration) time.Duration {
	return 2 * Lease(nodeTimeout).Heartbeat
}

// reconcileRestore brings into d, a snapshot about to be put in force,
// what schedd knows happened since it was saved (state.ReconcileDump):
// the live state's newer rows and later jobs, the accounting store's
// ended runs and highest job id. It fails, and nothing is restored, when
// the accounting store cannot be read: without it a restore could hand
// out ids again or re-run ended jobs.
func (s *ledger) reconcileRestore(ctx context.Context, d *state.Dump) (state.Reconciled, error) {
	floor, err := s.acct.MaxJobID(ctx)
	if err != nil {
		return state.Reconciled{}, fmt.Errorf("restore: reading the accounting store: %w", err)
	}
	var open []uint64
	for _, j := range d.Jobs {
		if !j.State.Terminal() && j.Array == nil {
			open = append(open, j.ID)
		}
	}
	f := state.RestoreFacts{Live: s.st.Snapshot(), Floor: floor}
	f.Ended = map[uint64][]state.EndedRun{}
	isOpen := map[uint64]bool{}
	for _, id := range open {
		isOpen[id] = true
	}
	for len(open) > 0 {
		// In chunks: a query's parameters are bounded (SQLite's 32766).
		n := min(len(open), 500)
		recs, err := s.acct.Query(ctx, api.HistoryFilter{IDs: open[:n]})
		if err != nil {
			return state.Reconciled{}, fmt.Errorf("restore: reading the accounting store: %w", err)
		}
		open = open[n:]
		for _, h := range recs {
			if !isOpen[h.ID] {
				continue // an element picked by its array's id
			}
			f.Ended[h.ID] = append(f.Ended[h.ID], endedRun(&h)) // every run: ended, and those a requeue ended
		}
	}
	r := state.ReconcileDump(d, f)
	s.log.Warn("restore reconciled with the live state and the accounting store",
		"next_job_id", r.LastJobID+1, "newer_in_live_state", len(r.Newer), "kept_from_live_state", len(r.Kept),
		"ended_from_accounting", len(r.Ended), "later_run_from_accounting", len(r.Requeued), "live_jobs_dropped", len(r.Dropped))
	if len(r.Dropped) > 0 {
		// The replaced state gave ids the backup had given to other jobs
		// (schedd ran on an empty data dir and took submits): those jobs
		// are not the backup's and are not kept.
		s.log.Warn("restore dropped jobs of the replaced state whose ids the backup gave to other jobs",
			"jobs", len(r.Dropped), "first", r.Dropped[0], "last", r.Dropped[len(r.Dropped)-1])
	}
	return r, nil
}

// endedRun is the accounting store's record h as a restore reads it.
func endedRun(h *api.HistoryJob) state.EndedRun {
	e := state.EndedRun{ID: h.ID, State: h.State, Reason: h.Reason, ExitCode: h.ExitCode, Requeues: h.Requeues,
		Started: h.Started, Ended: h.Ended, CPUTime: h.CPUTime, MemPeak: h.MemPeak}
	for _, c := range h.Containers {
		e.Containers = append(e.Containers, state.RunContainer(c))
	}
	return e
}
