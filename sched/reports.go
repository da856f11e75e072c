package sched

import (
	"context"
	"fmt"

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

// Report commits a nodelet's container updates. It returns once the entry
// carrying them is committed (durable, applied), like every write.
// Reports arriving together share an entry (groupCommit), in the order
// they arrived: two reports of one node keep their order.
func (s *lifecycle) Report(ctx context.Context, node string, rep api.ContainerReport) error {
	if len(rep.Updates) == 0 {
		return nil
	}
	_, err := s.reports.do(state.Report{Node: node, Updates: updateRows(rep.Updates)})
	return err
}

// updateRows are a node's updates as a report command carries them.
func updateRows(us []api.ContainerUpdate) []state.ContainerUpdate {
	out := make([]state.ContainerUpdate, len(us))
	for i, u := range us {
		out[i] = state.ContainerUpdate{JobID: u.JobID, Host: u.Host, Requeues: u.Requeues, State: u.State, ExitCode: u.ExitCode,
			Message: u.Message, CPUTime: u.CPUTime, MemPeak: u.MemPeak, At: u.At, Starting: u.Starting, Reach: u.Reach,
			Session: u.Session, Started: u.Started}
		if u.Job != nil {
			out[i].Job = assignedRow(u.Job)
		}
	}
	return out
}

// commitReports commits reports as one entry and answers each with the
// jobs it moved to RUNNING.
func (s *lifecycle) commitReports(rs []state.Report) ([][]state.Started, error) {
	defer s.wake()
	ctx := context.Background() // raft's own apply timeout bounds it
	at := s.cfg.Clock()         // the entry's time, as apply sets it
	res, err := s.apply(ctx, state.Command{Act: state.Reports{Reports: rs}})
	if err != nil {
		return nil, err
	}
	started, ok := res.([][]state.Started)
	if !ok || len(started) != len(rs) {
		return nil, fmt.Errorf("reports entry answered %T for %d reports", res, len(rs))
	}
	s.metrics.stages.reported(s.st.Snapshot(), rs, at)
	for _, st := range started {
		// Only the leader commits, and each start is committed once.
		s.metrics.observeStarts(st)
	}
	return started, nil
}
