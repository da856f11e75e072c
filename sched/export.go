package sched

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/accounting"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// Ended jobs leave the replicated state for the accounting store
// (accounting):
//
//	job ends ──► every server: Put into its own store (idempotent)
//	         ──► leader, once KeepEnded has passed and its own Put has
//	             committed: CmdPurge (the acknowledgement) ──► every
//	             replica drops the job
//
// An array's element leaves as soon as the store holds it, KeepEnded or
// not: an array of 100,000 elements would otherwise keep every ended
// element's row for KeepEnded, while its own row already counts them by
// state and bhist reads each from the store.
//
// A crash between the Put and the purge leaves the job in raft; the next
// leader exports it again (a no-op in the store: keyed by job id and
// run) and purges it. A job a live job depends on stays until that one
// ends (its dependency is evaluated from the state).

// Defaults of the accounting settings.
const (
	DefaultKeepEnded  = 5 * time.Minute
	DefaultExportEach = time.Second
	// exportBatch bounds one Put and one purge command.
	exportBatch = 2000
	// retentionEvery is how often the leader deletes rows past
	// AccountingKeep.
	retentionEvery = time.Hour
)

// exporter is the server's side of the hand-off: which runs its store
// holds already, as far as this process knows.
type exporter struct {
	mu   sync.Mutex // held to change done and conflict, and by readers other than ExportEnded
	done map[accounting.Key]bool
	// conflict holds the runs the store refused (another job holds their
	// id and run there): never exported again nor purged, so the state
	// keeps their history.
	conflict    map[accounting.Key]bool
	lastExpired time.Time
}

// lag is how long ago the oldest ended run in v that this server has not
// written to its accounting store ended (0 when none waits): what the
// store lacks while exports fail or hang.
func (e *exporter) lag(v *state.Snapshot, now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	var oldest time.Time
	for _, j := range v.Jobs() {
		if j.Array != nil {
			continue
		}
		for run := range endedRuns(j) {
			end := j.Ended
			if run < len(j.Runs) {
				end = j.Runs[run].Ended
			}
			if end.IsZero() || e.done[accounting.Key{ID: j.ID, Run: run}] {
				continue
			}
			if oldest.IsZero() || end.Before(oldest) {
				oldest = end
			}
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return max(now.Sub(oldest), 0)
}

// exportLoop exports ended jobs every ExportEvery until ctx ends; the
// leader also purges the exported ones past KeepEnded and applies
// retention.
func (s *ledger) exportLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.ExportEvery)
	defer t.Stop()
	for {
		if _, err := s.ExportEnded(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("exporting ended jobs to the accounting store", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ExportEnded writes the ended runs this server has not exported yet to
// its accounting store (a requeued job's earlier runs while it is still
// queued or running, each job's last run once it has ended) and, on the
// leader, commits the purge of those that ended KeepEnded ago or more
// (an array's elements at once).
// It returns how many it purged. A failed pass counts in
// troupe_schedd_accounting_export_errors_total.
func (s *ledger) ExportEnded(ctx context.Context) (int, error) {
	n, err := s.exportEnded(ctx)
	if err != nil && ctx.Err() == nil {
		s.metrics.exportErrors.Inc()
	}
	return n, err
}

func (s *ledger) exportEnded(ctx context.Context) (int, error) {
	s.exportMu.Lock()
	defer s.exportMu.Unlock()
	purged := 0
	for {
		v := s.st.Snapshot()
		now := s.cfg.Clock()
		cutoff := now.Add(-s.cfg.KeepEnded)
		needed := map[uint64]bool{} // named by a live job's dependency
		var recs []api.HistoryJob
		var ripe []state.PurgeKey
		inState := map[accounting.Key]bool{}
		for _, j := range v.Jobs() {
			if !j.State.Terminal() && j.DependsOn != nil {
				for _, c := range j.DependsOn.Conditions {
					needed[c.JobID] = true
					if e := dependencyElement(v, conditionView(c)); e != nil {
						needed[e.ID] = true // done(12[5]) reads element 5's row
					}
				}
			}
			if j.Array != nil {
				if j.State.Terminal() {
					// An array's own row is no run: its elements are
					// stored one by one; the row leaves raft with them.
					k := accounting.Key{ID: j.ID, Run: j.Requeues}
					inState[k] = true
					s.exp.mu.Lock()
					s.exp.done[k] = true
					s.exp.mu.Unlock()
				}
				continue
			}
			// Each ended run: those a requeue ended as soon as it did,
			// while the job goes on, and its last once it has ended.
			// Records are built only for a job with a run not exported
			// (nor refused by the store).
			pending := false
			for run := range endedRuns(j) {
				k := accounting.Key{ID: j.ID, Run: run}
				inState[k] = true
				pending = pending || (!s.exp.done[k] && !s.exp.conflict[k])
			}
			if !pending || len(recs) >= exportBatch {
				continue
			}
			for _, h := range RunRecords(j) {
				if k := accounting.KeyOf(&h); !s.exp.done[k] && !s.exp.conflict[k] && len(recs) < exportBatch {
					recs = append(recs, h)
				}
			}
		}
		if len(recs) > 0 {
			_, err := s.acct.Put(ctx, recs)
			var ce *accounting.ConflictError
			switch {
			case errors.As(err, &ce):
				// The rest is stored; the refused records stay in the
				// state's history (and are not purged) but never reach
				// the store: say so at once, loudly.
				s.metrics.acctConflicts.Add(float64(len(ce.Records)))
				s.log.Error("accounting store refused ended runs: it holds other jobs under their ids", "records", ce.Records)
			case err != nil:
				return purged, err
			}
			refused := map[accounting.Key]bool{}
			if ce != nil {
				for _, k := range ce.Keys {
					refused[k] = true
				}
			}
			s.exp.mu.Lock()
			for i := range recs {
				k := accounting.KeyOf(&recs[i])
				if refused[k] {
					s.exp.conflict[k] = true
					continue
				}
				s.exp.done[k] = true
			}
			s.exp.mu.Unlock()
		}
		s.exp.mu.Lock()
		for k := range s.exp.done {
			if !inState[k] {
				delete(s.exp.done, k) // purged: forget it
			}
		}
		for k := range s.exp.conflict {
			if !inState[k] {
				delete(s.exp.conflict, k)
			}
		}
		s.exp.mu.Unlock()
		if !s.raft.IsLeader() {
			return purged, nil
		}
		for _, j := range v.Jobs() {
			if j.State.Terminal() && s.exported(j) && (j.ArrayID != 0 || !j.Ended.After(cutoff)) && !needed[j.ID] && len(ripe) < exportBatch {
				ripe = append(ripe, state.PurgeKey{JobID: j.ID, Run: j.Requeues})
			}
		}
		if err := s.expire(ctx, now); err != nil {
			return purged, err
		}
		if len(ripe) == 0 {
			return purged, nil
		}
		if h := testHookAfterExport.Load(); h != nil {
			if err := (*h)(s.replica, ripe); err != nil {
				return purged, err
			}
		}
		if _, err := s.apply(ctx, state.Command{Act: state.Purge{Keys: ripe}}); err != nil {
			return purged, fmt.Errorf("purging %d exported jobs: %w", len(ripe), err)
		}
		purged += len(ripe)
		if len(ripe) < exportBatch && len(recs) < exportBatch {
			return purged, nil
		}
	}
}

// exported tells whether every run of the ended job j is in the store
// (as far as this process knows): only then may it leave raft.
func (s *ledger) exported(j *state.Job) bool {
	for run := range endedRuns(j) {
		if !s.exp.done[accounting.Key{ID: j.ID, Run: run}] {
			return false
		}
	}
	return true
}

// endedRuns yields the numbers of j's ended runs, those RunRecords
// makes records of: each a requeue ended, then its last once j ended.
func endedRuns(j *state.Job) iter.Seq[int] {
	return func(yield func(int) bool) {
		for run := range j.Runs {
			if !yield(run) {
				return
			}
		}
		if j.State.Terminal() {
			yield(j.Requeues)
		}
	}
}

// expire deletes the store's rows older than AccountingKeep, at most once
// per retentionEvery.
func (s *ledger) expire(ctx context.Context, now time.Time) error {
	if s.cfg.AccountingKeep <= 0 || now.Sub(s.exp.lastExpired) < retentionEvery {
		return nil
	}
	n, err := s.acct.Expire(ctx, now.Add(-s.cfg.AccountingKeep))
	if err != nil {
		return err
	}
	s.exp.lastExpired = now
	if n > 0 {
		s.log.Info("accounting retention", "deleted", n, "older than", now.Add(-s.cfg.AccountingKeep))
	}
	return nil
}

// openAccounting opens the store cfg names.
func openAccounting(ctx context.Context, cfg Config) (*accounting.Store, error) {
	switch cfg.AccountingDriver {
	case "", accounting.DriverSQLite:
		return accounting.OpenSQLite(ctx, cfg.AccountingPath)
	case accounting.DriverPostgres:
		if cfg.AccountingDSN == "" {
			return nil, fmt.Errorf("%w: accounting driver postgres needs a dsn (postgres://user@host/db)", ErrInvalid)
		}
		return accounting.OpenPostgres(ctx, cfg.AccountingDSN)
	}
	return nil, fmt.Errorf("%w: accounting driver %q: want sqlite or postgres", ErrInvalid, cfg.AccountingDriver)
}

// Accounting is the server's accounting store (tests, benchmarks).
func (s *ledger) Accounting() *accounting.Store { return s.acct }
