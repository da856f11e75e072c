package sched

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/core"
)

// TestEligibilityInCoreSnapshot: holds, dependencies and the partition's
// job limits reach the core, whose eligible stage decides them. Of ada's
// plain job, bob's held one and bob's waiting on done(ada's), one pass
// starts ada's; the held job and the dependent one keep the reasons
// schedd gave them at submission (Held, Dependency), so the plan sets
// none again (a plan that did would be committed on every pass). Once
// ada's job completes, the dependent job starts.
func TestEligibilityInCoreSnapshot(t *testing.T) {
	srv, c, _ := partitioned(t, limitsFile, nil)
	ctx := context.Background()
	plain, err := submitAs(c, "ada", spec(1, jobspec.ModeSingleNode, 1))
	if err != nil {
		t.Fatal(err)
	}
	held, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), User: "bob", UID: 1000, GID: 1000, Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	dep, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), User: "bob", UID: 1000, GID: 1000,
		DependsOn: &api.Dependency{Conditions: []api.Condition{{Kind: api.DepDone, JobID: plain.JobID}}}})
	if err != nil {
		t.Fatal(err)
	}
	free := core.Res{CPUMilli: 4000, Memory: 16 << 30}
	nodes := []core.Node{{Name: "n1", Capacity: free, Free: free, Partitions: []string{"cpu"}}}
	now := srv.cfg.Clock()
	snap := coreSnapshot(srv.Store().Snapshot(), nodes, now)

	if l := snap.Partitions["cpu"].Jobs; l.MaxWalltime != 2*time.Hour || l.MaxSize != 4 || !slices.Equal(l.Modes, []string{jobspec.ModeSingleNode}) {
		t.Errorf("partition cpu's job limits in the core: %+v", l)
	}
	byID := map[uint64]core.Job{}
	for _, j := range snap.Queue {
		byID[j.ID] = j
	}
	if len(byID) != 3 || !byID[held.JobID].Held || byID[plain.JobID].Held || byID[dep.JobID].Depends == nil {
		t.Fatalf("queue %+v: want the three jobs, %d held, %d with a dependency", snap.Queue, held.JobID, dep.JobID)
	}
	want := core.Dependency{Conditions: []core.Condition{{Kind: api.DepDone, Job: core.JobRef{ID: plain.JobID}}}}
	if d := byID[dep.JobID].Depends; d.Any || !slices.Equal(d.Conditions, want.Conditions) {
		t.Errorf("job %d's dependency in the core: %+v, want %+v", dep.JobID, d, want)
	}
	if st, ok := snap.Named[core.JobRef{ID: plain.JobID}]; !ok || st != (core.JobStatus{}) {
		t.Errorf("what the core knows of job %d: %+v (%v), want pending", plain.JobID, st, ok)
	}

	plan := core.Schedule(snap, now)
	if len(plan.Placements) != 1 || plan.Placements[0].JobID != plain.JobID {
		t.Fatalf("placements %+v, want job %d only", plan.Placements, plain.JobID)
	}
	for _, r := range plan.Reasons {
		if r.JobID == held.JobID || r.JobID == dep.JobID {
			t.Errorf("the plan sets job %d's reason to %s: schedd gave it at submission", r.JobID, r.Reason)
		}
	}

	// ada's job completes: bob's dependent job is eligible and starts.
	register(t, c, "n1", 4)
	finish(t, c, plain.JobID, 0)
	waitJob(t, c, dep.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	if j, _, err := c.Job(ctx, held.JobID, 0, 0); err != nil || j.State != api.JobHeld || j.Reason != api.ReasonHeld {
		t.Fatalf("held job %d: %+v, %v", held.JobID, j, err)
	}
}
