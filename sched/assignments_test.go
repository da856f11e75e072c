package sched

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// TestAssignmentsWakeOwnNodeOnly: with two nodes each running a job, a
// change to the job on node a answers a's blocking assignments query and
// does not wake b's, which stays blocked until its own job changes. The
// answers carry the node's index; an older index is answered at once.
func TestAssignmentsWakeOwnNodeOnly(t *testing.T) {
	srv, c := cluster(t)
	var mu sync.Mutex
	woke := map[string]int{}
	setHook(t, &testHookAssignWoke, func(r *replica, node string) {
		if r == srv.replica {
			mu.Lock()
			woke[node]++
			mu.Unlock()
		}
	})
	wakes := func(node string) int { mu.Lock(); defer mu.Unlock(); return woke[node] }
	ctx := context.Background()
	register(t, c, "a", 4)
	register(t, c, "b", 4)
	on := map[string]uint64{}
	for range 2 {
		res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 4)), UID: 1000, GID: 1000, User: "ada"})
		if err != nil {
			t.Fatal(err)
		}
		j := waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
		on[j.Containers[0].Node] = j.ID
	}
	if on["a"] == 0 || on["b"] == 0 {
		t.Fatalf("two 4-cpu jobs on two 4-cpu nodes placed as %v", on)
	}
	first := map[string]api.Assignments{}
	for _, n := range []string{"a", "b"} {
		as, err := c.Assignments(ctx, n, 0, 0)
		if err != nil || len(as.Assignments) != 1 || as.Assignments[0].Job.ID != on[n] || as.Index == 0 {
			t.Fatalf("node %s's assignments: %+v, %v", n, as, err)
		}
		first[n] = as
	}
	if old, err := c.Assignments(ctx, "b", first["b"].Index-1, time.Minute); err != nil || old.Index != first["b"].Index {
		t.Fatalf("b's assignments past an older index: %+v, %v; want an answer at once at %d", old, err, first["b"].Index)
	}

	// b blocks past its index.
	before := wakes("b")
	bDone := make(chan api.Assignments, 1)
	go func() {
		as, err := c.Assignments(ctx, "b", first["b"].Index, 5*time.Minute)
		if err != nil {
			t.Errorf("b's blocking query: %v", err)
		}
		bDone <- as
	}()
	eventually.True(t, 30*time.Second, "b's blocking query arriving", func() bool { return wakes("b") != before })

	// Killing a's job answers a's query.
	aDone := make(chan api.Assignments, 1)
	go func() {
		as, err := c.Assignments(ctx, "a", first["a"].Index, 5*time.Minute)
		if err != nil {
			t.Errorf("a's blocking query: %v", err)
		}
		aDone <- as
	}()
	if _, err := c.Kill(ctx, on["a"]); err != nil {
		t.Fatal(err)
	}
	select {
	case as := <-aDone:
		if as.Index <= first["a"].Index || len(as.Assignments) != 1 || !as.Assignments[0].Job.KillWanted {
			t.Fatalf("a's answer after the kill: %+v", as)
		}
	case <-time.After(time.Minute):
		t.Fatal("a's blocking query did not answer a change to a's job")
	}
	select {
	case as := <-bDone:
		t.Fatalf("b's query answered a change to a's job, at index %d", as.Index)
	default:
	}

	// b's own job changes: b answers, having woken for that alone.
	if _, err := c.Kill(ctx, on["b"]); err != nil {
		t.Fatal(err)
	}
	select {
	case as := <-bDone:
		if as.Index <= first["b"].Index || len(as.Assignments) != 1 || !as.Assignments[0].Job.KillWanted {
			t.Fatalf("b's answer after its kill: %+v", as)
		}
	case <-time.After(time.Minute):
		t.Fatal("b's blocking query did not answer a change to b's job")
	}
	if n := wakes("b") - before; n != 2 {
		t.Errorf("b's query read its index %d times (arrival, then each wake), want 2: the arrival and b's own kill", n)
	}
}
