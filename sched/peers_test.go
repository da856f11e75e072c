package sched

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// TestAssignmentsPeers: a node's assignment of a user's job carries the
// routed default addresses its nodelets reported for the same user's
// containers on other nodes (Peers), never another user's nor its own
// node's; a container's address reported on one node wakes the nodes of
// its user's other jobs, and its end takes it out of their Peers.
func TestAssignmentsPeers(t *testing.T) {
	_, c := cluster(t)
	ctx := context.Background()
	for _, n := range []string{"a", "b", "c"} {
		register(t, c, n, 4)
	}
	on := map[string]api.Job{}
	for _, uid := range []int{1000, 1000, 2000} {
		res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 4)), UID: uid, GID: uid, User: "u"})
		if err != nil {
			t.Fatal(err)
		}
		j := waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
		on[j.Containers[0].Node] = j
	}
	if len(on) != 3 {
		t.Fatalf("three 4-cpu jobs on three 4-cpu nodes placed as %v", on)
	}
	var mine, theirs []string // nodes of uid 1000's jobs, of 2000's
	for n, j := range on {
		if j.UID == 1000 {
			mine = append(mine, n)
		} else {
			theirs = append(theirs, n)
		}
	}
	slices.Sort(mine)
	peers := func(n string) []string {
		as, err := c.Assignments(ctx, n, 0, 0)
		if err != nil || len(as.Assignments) != 1 {
			t.Fatalf("node %s's assignments: %+v, %v", n, as, err)
		}
		return as.Assignments[0].Peers
	}
	first, err := c.Assignments(ctx, mine[1], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	woke := make(chan api.Assignments, 1)
	go func() {
		as, err := c.Assignments(ctx, mine[1], first.Index, time.Minute)
		if err != nil {
			t.Error(err)
		}
		woke <- as
	}()
	addr := map[string]string{mine[0]: "10.128.1.2", mine[1]: "10.128.2.2", theirs[0]: "10.128.3.2"}
	for n, a := range addr {
		if err := c.Report(ctx, n, api.ContainerReport{Updates: []api.ContainerUpdate{
			{JobID: on[n].ID, Host: "main1", State: api.ContainerRunning, Reach: a}}}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case as := <-woke:
		if len(as.Assignments) != 1 || len(as.Assignments[0].Peers) == 0 {
			t.Errorf("%s woke with %+v", mine[1], as)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s was not woken by its user's container's address on %s", mine[1], mine[0])
	}
	if got := peers(mine[0]); !slices.Equal(got, []string{addr[mine[1]]}) {
		t.Errorf("%s's peers %v, want uid 1000's container on %s alone (%s)", mine[0], got, mine[1], addr[mine[1]])
	}
	if got := peers(mine[1]); !slices.Equal(got, []string{addr[mine[0]]}) {
		t.Errorf("%s's peers %v, want %s", mine[1], got, addr[mine[0]])
	}
	if got := peers(theirs[0]); len(got) != 0 {
		t.Errorf("uid 2000's node %s has peers %v, want none", theirs[0], got)
	}
	if j := waitJob(t, c, on[mine[0]].ID, func(j api.Job) bool { return j.State == api.JobRunning }); j.Containers[0].Reach != addr[mine[0]] {
		t.Errorf("job %d shows reach %q, want %s", j.ID, j.Containers[0].Reach, addr[mine[0]])
	}
	if err := c.Report(ctx, mine[0], api.ContainerReport{Updates: []api.ContainerUpdate{
		{JobID: on[mine[0]].ID, Host: "main1", State: api.ContainerExited}}}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, on[mine[0]].ID, func(j api.Job) bool { return j.State.Terminal() })
	if got := peers(mine[1]); len(got) != 0 {
		t.Errorf("%s keeps peers %v after its user's other job ended", mine[1], got)
	}
}
