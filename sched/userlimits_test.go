package sched

import (
	"testing"

	"github.com/troupe-hpc/troupe/internal/reason"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched/core"
)

// TestUserLimitsInCoreSnapshot: the partition's user_limits reach the
// core, which enforces them within the pass. ada (max_jobs = 1) has two
// queued jobs and bob one, on a free node of 2 cores: one pass starts
// ada's first and bob's, and ada's second waits AccountLimit. (When the
// limit was stripped from the plan after the core, the core gave the
// node to ada's two jobs, and bob's waited a pass for the stripped
// one's room.)
func TestUserLimitsInCoreSnapshot(t *testing.T) {
	srv, c, _ := partitioned(t, limitsFile, nil)
	var ids []uint64
	for _, user := range []string{"ada", "ada", "bob"} {
		res, err := submitAs(c, user, spec(1, jobspec.ModeSingleNode, 1))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.JobID)
	}
	v := srv.Store().Snapshot()
	now := srv.cfg.Clock()
	free := core.Res{CPUMilli: 2000, Memory: 64 << 30}
	snap := coreSnapshot(v, []core.Node{{Name: "n1", Capacity: free, Free: free, Partitions: []string{"cpu"}}}, now)
	if got, want := snap.Partitions["cpu"].UserLimits, (core.Limits{Jobs: 1, Res: core.Res{CPUMilli: 3000}}); got != want {
		t.Fatalf("partition cpu's user limits in the core: %+v, want %+v", got, want)
	}
	if len(snap.Queue) != 3 {
		t.Fatalf("queue of %d, want 3", len(snap.Queue))
	}
	for _, j := range snap.Queue {
		if r := core.Ineligible(&snap, &j); r != "" {
			t.Fatalf("job %d is ineligible in the core (%s): per-user limits are the limits stage's", j.ID, r)
		}
	}
	plan := core.Schedule(snap, now)
	placed := map[uint64]bool{}
	for _, pl := range plan.Placements {
		placed[pl.JobID] = true
	}
	if len(placed) != 2 || !placed[ids[0]] || !placed[ids[2]] {
		t.Fatalf("placed %v, want ada's %d and bob's %d", placed, ids[0], ids[2])
	}
	for _, r := range plan.Reasons {
		if r.JobID == ids[1] && r.Reason == reason.AccountLimit {
			return
		}
	}
	t.Fatalf("ada's second job %d: reasons %+v, want AccountLimit", ids[1], plan.Reasons)
}
