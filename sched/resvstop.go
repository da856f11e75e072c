package sched

import (
	"context"
	"time"

	"github.com/troupe-hpc/troupe/sched/state"
)

// stopInTheWay commits the stop of the jobs still running, once a
// reservation's window has opened, on its nodes when it was made with
// stop_jobs and they are not its own (state.StopReserved): one
// reservation a pass, with the partitions that requeue their jobs. The
// loop wakes at every window's edge, so this runs as a window opens; a
// stopped job is stopping (KillWanted) from the entry on and is never
// picked twice. It answers whether it committed anything. While the
// cluster's schema is older than the reservations' it does nothing (no
// reservation exists then).
func (s *scheduler) stopInTheWay(ctx context.Context, v *state.Snapshot, now time.Time) (bool, error) {
	name, ids := v.InTheWay(now)
	if len(ids) == 0 {
		return false, nil
	}
	act := state.StopReserved{Reservation: name, Jobs: ids}
	if s.writable(act) != nil {
		return false, nil
	}
	for _, p := range v.Config().Partitions {
		if p.Requeue {
			act.Requeue = append(act.Requeue, p.Name)
		}
	}
	s.log.Warn("reservation's window opened: stopping the jobs still running on its nodes", "reservation", name, "jobs", ids)
	if _, err := s.apply(ctx, state.Command{Act: act}); err != nil {
		return false, err
	}
	return true, nil
}
