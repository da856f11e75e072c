package sched

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

func arraySpec(rng string, maxRunning int) jobspec.Job {
	s := spec(1, jobspec.ModeSingleNode, 1)
	s.Array = &jobspec.Array{Range: rng, MaxRunning: maxRunning}
	return s
}

func submitArray(t *testing.T, c *client.Client, rng string, maxRunning int) uint64 {
	t.Helper()
	res, err := c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(arraySpec(rng, maxRunning)), Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	return res.JobID
}

// waitElement blocks until element idx of array id satisfies cond.
func waitElement(t *testing.T, c *client.Client, id uint64, idx int, cond func(api.Job) bool) api.Job {
	t.Helper()
	ref := api.JobRef{ID: id, Index: idx, Element: true}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var at uint64
	for {
		j, i, err := c.JobRef(ctx, ref, at, 5*time.Second)
		if err != nil {
			t.Fatalf("waiting for %s: %v", ref, err)
		}
		if cond(j) {
			return j
		}
		at = i
	}
}

// started lists the array's elements placed and not ended, by index.
func startedElements(t *testing.T, c *client.Client, id uint64) []int {
	t.Helper()
	list, err := c.ArrayElements(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range list.Jobs {
		if e.ArrayID != id {
			t.Fatalf("array %d lists %s", id, e.Ref())
		}
		if !e.State.Terminal() && e.State != api.JobPending && e.State != api.JobHeld {
			out = append(out, e.ArrayIndex)
		}
	}
	return out
}

// TestArrayThrottle: an array of 10 with max_running 3 on a node with
// room for 8 runs 3 elements at a time, lowest indices first; as one
// ends the next starts; every element sees its index, and the array
// ends COMPLETED once all have.
func TestArrayThrottle(t *testing.T) {
	_, c := cluster(t)
	register(t, c, "n1", 8)
	id := submitArray(t, c, "1-10", 3)
	for idx := 1; idx <= 3; idx++ {
		waitElement(t, c, id, idx, func(j api.Job) bool { return j.State == api.JobScheduled })
	}
	e4 := waitElement(t, c, id, 4, func(j api.Job) bool { return j.Reason == api.ReasonArrayTaskLimit })
	if e4.State != api.JobPending {
		t.Fatalf("element 4 is %s", e4.State)
	}
	if got := startedElements(t, c, id); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("started elements %v, want [1 2 3]", got)
	}
	p, _, err := c.Job(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != api.JobRunning || p.Array.States[api.JobScheduled] != 3 || p.Array.States[api.JobPending] != 7 {
		t.Fatalf("array %d: %s %v", id, p.State, p.Array.States)
	}
	for idx := 1; idx <= 10; idx++ {
		e := waitElement(t, c, id, idx, func(j api.Job) bool { return j.State == api.JobScheduled })
		if e.ArrayIndex != idx || e.ArrayID != id || e.ID == id || e.ArraySpan.Max != 10 {
			t.Fatalf("element %d: %+v", idx, e)
		}
		if n := len(startedElements(t, c, id)); n > 3 {
			t.Fatalf("%d elements started; max_running is 3", n)
		}
		finish(t, c, e.ID, 0)
	}
	p = waitJob(t, c, id, func(j api.Job) bool { return j.State.Terminal() })
	if p.State != api.JobCompleted || p.Array.States[api.JobCompleted] != 10 {
		t.Fatalf("array ended %s %v", p.State, p.Array.States)
	}
}

// TestArrayKill: bkill "12[5]" cancels one element (even one that has
// not come up yet), the rest go on; bkill 12 cancels the whole array,
// running elements included, and the array ends CANCELLED.
func TestArrayKill(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	register(t, c, "n1", 1)             // room for one element at a time
	id := submitArray(t, c, "1-300", 0) // more than the window
	e1 := waitElement(t, c, id, 1, func(j api.Job) bool { return j.State == api.JobScheduled })

	e250, err := c.Control(ctx, api.JobRef{ID: id, Index: 250, Element: true}, "kill", nil)
	if err != nil {
		t.Fatal(err)
	}
	if e250.State != api.JobCancelled || e250.ArrayIndex != 250 {
		t.Fatalf("bkill %d[250]: %s %+v", id, e250.State, e250)
	}
	if _, err := c.Control(ctx, api.JobRef{ID: id, Index: 301, Element: true}, "kill", nil); !client.IsNotFound(err) {
		t.Fatalf("bkill %d[301] (no such element): %v", id, err)
	}
	p, _, _ := c.Job(ctx, id, 0, 0)
	if p.State != api.JobRunning || p.Array.States[api.JobCancelled] != 1 {
		t.Fatalf("after one element's kill the array is %s %v", p.State, p.Array.States)
	}

	if _, err := c.Control(ctx, api.JobRef{ID: id}, "kill", nil); err != nil {
		t.Fatal(err)
	}
	// The running element is stopped by its nodelet: play it.
	j := waitJob(t, c, e1.ID, func(j api.Job) bool { return j.KillWanted })
	if err := c.Report(ctx, j.Containers[0].Node, api.ContainerReport{Updates: []api.ContainerUpdate{
		{JobID: e1.ID, Host: "main1", State: api.ContainerKilled}}}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []uint64{e1.ID} {
		waitJob(t, c, e, func(j api.Job) bool { return j.State == api.JobCancelled })
	}
	p = waitJob(t, c, id, func(j api.Job) bool { return j.State.Terminal() })
	if p.State != api.JobCancelled || p.Array.States[api.JobCancelled] != 300 {
		t.Fatalf("killed array ended %s %v", p.State, p.Array.States)
	}
	if e := waitElement(t, c, id, 200, func(api.Job) bool { return true }); e.State != api.JobCancelled {
		t.Fatalf("element 200 of a killed array is %s", e.State)
	}
}

// TestArrayHold: bhold of the whole array keeps every element from
// starting; brelease of one element lets that one start, of the array
// all of them.
func TestArrayHold(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	id := submitArray(t, c, "1-4", 0)
	if _, err := c.Control(ctx, api.JobRef{ID: id}, "hold", nil); err != nil {
		t.Fatal(err)
	}
	register(t, c, "n1", 8)
	p := waitJob(t, c, id, func(j api.Job) bool { return j.State == api.JobHeld })
	if p.Array.States[api.JobHeld] != 4 {
		t.Fatalf("held array: %v", p.Array.States)
	}
	// brelease "12[2]": that element alone may start.
	if _, err := c.Control(ctx, api.JobRef{ID: id, Index: 2, Element: true}, "release", nil); err != nil {
		t.Fatal(err)
	}
	waitElement(t, c, id, 2, func(j api.Job) bool { return j.State == api.JobScheduled })
	if e, _, _ := c.JobRef(ctx, api.JobRef{ID: id, Index: 1, Element: true}, 0, 0); e.State != api.JobHeld {
		t.Fatalf("element 1 of the held array is %s", e.State)
	}
	if _, err := c.Control(ctx, api.JobRef{ID: id}, "release", nil); err != nil {
		t.Fatal(err)
	}
	for idx := 1; idx <= 4; idx++ {
		waitElement(t, c, id, idx, func(j api.Job) bool { return j.State == api.JobScheduled })
	}
}

// TestArrayDependency: done(A) waits for every element of array A;
// done(A[1]) for element 1 alone.
func TestArrayDependency(t *testing.T) {
	_, c := cluster(t)
	register(t, c, "n1", 8)
	a := submitArray(t, c, "1-2", 0)
	whole := dependent(t, c, fmt.Sprintf("done(%d)", a))
	one := dependent(t, c, fmt.Sprintf("done(%d[1])", a))
	slurm := dependent(t, c, fmt.Sprintf("afterok:%d_2", a))
	e1 := waitElement(t, c, a, 1, func(j api.Job) bool { return j.State == api.JobScheduled })
	e2 := waitElement(t, c, a, 2, func(j api.Job) bool { return j.State == api.JobScheduled })
	waitJob(t, c, one, func(j api.Job) bool { return j.Reason == api.ReasonDependency })
	finish(t, c, e1.ID, 0)
	waitJob(t, c, one, func(j api.Job) bool { return j.State == api.JobScheduled })
	if j, _, _ := c.Job(context.Background(), whole, 0, 0); j.State != api.JobPending || j.Reason != api.ReasonDependency {
		t.Fatalf("done(%d) with element 2 running: %s %s", a, j.State, j.Reason)
	}
	finish(t, c, e2.ID, 0)
	waitJob(t, c, whole, func(j api.Job) bool { return j.State == api.JobScheduled })
	waitJob(t, c, slurm, func(j api.Job) bool { return j.State == api.JobScheduled })

	// An element that failed: done(A) can never be satisfied.
	b := submitArray(t, c, "1-2", 0)
	never := dependent(t, c, fmt.Sprintf("done(%d)", b))
	eb := waitElement(t, c, b, 1, func(j api.Job) bool { return j.State == api.JobScheduled })
	finish(t, c, eb.ID, 3)
	eb2 := waitElement(t, c, b, 2, func(j api.Job) bool { return j.State == api.JobScheduled })
	finish(t, c, eb2.ID, 0)
	waitJob(t, c, b, func(j api.Job) bool { return j.State == api.JobFailed })
	waitJob(t, c, never, func(j api.Job) bool { return j.Reason == api.ReasonDependencyNeverSatisfied })

	// An array that waits for a job: its elements wait too, and the
	// array's row says why.
	first, err := c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := api.ParseDependency(fmt.Sprintf("done(%d)", first.JobID))
	res, err := c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(arraySpec("1-2", 0)), DependsOn: d})
	if err != nil {
		t.Fatal(err)
	}
	waitElement(t, c, res.JobID, 1, func(j api.Job) bool { return j.Reason == api.ReasonDependency })
	if p, _, _ := c.Job(context.Background(), res.JobID, 0, 0); p.State != api.JobPending || p.Reason != api.ReasonDependency {
		t.Fatalf("array waiting on job %d: %s (%s)", first.JobID, p.State, p.Reason)
	}
	finish(t, c, first.JobID, 0)
	waitElement(t, c, res.JobID, 1, func(j api.Job) bool { return j.State == api.JobScheduled })

	// Refusals: an element the array lacks, an element of a plain job.
	for _, expr := range []string{fmt.Sprintf("done(%d[7])", a), fmt.Sprintf("done(%d[1])", whole)} {
		d, _ := api.ParseDependency(expr)
		if _, err := c.Submit(context.Background(), api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), DependsOn: d}); err == nil {
			t.Errorf("submit -w %s was taken", expr)
		}
	}
}
