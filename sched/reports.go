package sched

import (
	"context"
	"fmt"
	"sync"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// An entry carries at most maxReportBatch reports, and no more reports
// once it holds maxReportUpdates updates (a nodelet sends at most 256 in
// one): entries stay small enough to replicate at once.
const (
	maxReportBatch   = 64
	maxReportUpdates = 1024
)

// reportQueue group-commits nodelet reports: the reports that arrive
// while one entry is being committed go out together in the next one. A
// report on an idle log is committed at once (no timer, no added
// latency); under load an entry carries every report that arrived during
// the previous commit (up to maxReportBatch), so the number of entries
// follows the commit rate, not the report rate.
type reportQueue struct {
	mu      sync.Mutex
	waiting []*reportCall
	busy    bool // a committer goroutine runs
	// gate, when set (tests), runs before each entry is proposed, with
	// the number of reports it carries.
	gate func(n int)
}

// reportCall is one report waiting for its entry to commit.
type reportCall struct {
	rep  state.Report
	done chan reportOutcome // buffered 1: the committer never blocks
}

type reportOutcome struct {
	started []state.Started
	err     error
}

// Report commits a nodelet's container updates. It returns once the entry
// carrying them is committed (durable, applied), like every write.
// Reports arriving together share an entry, in the order they arrived:
// two reports of one node keep their order.
func (s *Server) Report(ctx context.Context, node string, rep api.ContainerReport) error {
	if len(rep.Updates) == 0 {
		return nil
	}
	call := &reportCall{rep: state.Report{Node: node, Updates: rep.Updates}, done: make(chan reportOutcome, 1)}
	q := &s.reports
	q.mu.Lock()
	q.waiting = append(q.waiting, call)
	if !q.busy {
		q.busy = true
		go s.commitReports()
	}
	q.mu.Unlock()
	// The committer answers every call it takes once raft has answered
	// the entry (committed, refused, or leadership lost); waiting for it
	// rather than for ctx keeps the answer true: a report is acknowledged
	// only once committed.
	out := <-call.done
	return out.err
}

// commitReports commits the waiting reports, an entry at a time, until
// none waits.
func (s *Server) commitReports() {
	q := &s.reports
	for {
		q.mu.Lock()
		n, updates := 0, 0
		for n < len(q.waiting) && n < maxReportBatch && (n == 0 || updates < maxReportUpdates) {
			updates += len(q.waiting[n].rep.Updates)
			n++
		}
		if n == 0 {
			q.busy = false
			q.mu.Unlock()
			return
		}
		batch := append([]*reportCall(nil), q.waiting[:n]...)
		q.waiting = append(q.waiting[:0], q.waiting[n:]...)
		gate := q.gate
		q.mu.Unlock()
		if gate != nil {
			gate(len(batch))
		}
		s.commitReportBatch(batch)
	}
}

// commitReportBatch commits batch as one entry and answers each call.
func (s *Server) commitReportBatch(batch []*reportCall) {
	ctx := context.Background() // raft's own apply timeout bounds it
	started := make([][]state.Started, len(batch))
	at := s.cfg.Clock() // the entry's time, as apply sets it
	var err error
	if len(batch) == 1 {
		var res any
		res, err = s.apply(ctx, state.Command{Kind: state.CmdReport, Report: &batch[0].rep})
		started[0], _ = res.([]state.Started)
	} else {
		rs := make([]state.Report, len(batch))
		for i, c := range batch {
			rs[i] = c.rep
		}
		var res any
		res, err = s.apply(ctx, state.Command{Kind: state.CmdReports, Reports: rs})
		if err == nil {
			per, ok := res.([][]state.Started)
			if !ok || len(per) != len(batch) {
				err = fmt.Errorf("reports entry answered %T for %d reports", res, len(batch))
			} else {
				started = per
			}
		}
	}
	if err == nil {
		rs := make([]state.Report, len(batch))
		for i, c := range batch {
			rs[i] = c.rep
		}
		s.metrics.stages.reported(s.st.Snapshot(), rs, at)
	}
	for i, c := range batch {
		if err == nil {
			// Only the leader commits, and each start is committed once.
			s.metrics.observeStarts(started[i])
		}
		c.done <- reportOutcome{started: started[i], err: err}
	}
	s.wake()
}
