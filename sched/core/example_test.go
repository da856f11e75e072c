package core_test

import (
	"fmt"
	"time"

	"github.com/troupe-hpc/troupe/sched/core"
)

// One pass with EASY backfill: job 2 cannot start until job 1 ends, so it
// gets a reservation; job 3 is short enough to run before then.
func ExampleSchedule() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cap8 := core.Res{CPUMilli: 8000, Memory: 32 << 30}
	s := core.Snapshot{
		Nodes: []core.Node{{Name: "n1", Capacity: cap8, Free: core.Res{CPUMilli: 2000, Memory: 8 << 30}}},
		Running: []core.Running{{JobID: 1, Start: now.Add(-time.Hour), Walltime: 2 * time.Hour,
			Nodes: []string{"n1"}, Containers: []core.Res{{CPUMilli: 6000, Memory: 24 << 30}}}},
		Queue: []core.Job{
			{ID: 2, Containers: []core.Res{{CPUMilli: 8000, Memory: 8 << 30}}, Walltime: time.Hour},
			{ID: 3, Containers: []core.Res{{CPUMilli: 2000, Memory: 1 << 30}}, Walltime: 30 * time.Minute},
		},
		Policy: core.Policy{ReservationDepth: 1},
	}
	p := core.Schedule(s, now)
	for _, pl := range p.Placements {
		fmt.Println("start", pl.JobID, "on", pl.Nodes, "backfilled:", pl.Backfilled)
	}
	for _, r := range p.Reasons {
		fmt.Println("job", r.JobID, "pending:", r.Reason)
	}
	for _, st := range p.Starts {
		fmt.Println("job", st.JobID, "expected at", st.Start.Format("15:04"), "on", st.Nodes)
	}
	// Output:
	// start 3 on [n1] backfilled: true
	// job 2 pending: Resources
	// job 2 expected at 13:00 on [n1]
}
