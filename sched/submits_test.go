package sched

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// TestSubmitsShareEntries: single submits (POST /v1/jobs) that arrive
// while an entry is being committed share the next entry: 40 concurrent
// submits take a handful of raft entries, each gets its own job with the
// spec it sent, and a retried request still gets the job its first try
// made.
func TestSubmitsShareEntries(t *testing.T) {
	const n = 40
	srv, c := cluster(t)
	ctx := context.Background()

	// Hold the first entry until every other submit waits behind it: on
	// a loaded machine the requests could otherwise trickle in one
	// commit at a time.
	var (
		mu      sync.Mutex
		sizes   []int
		waiting = func() int {
			srv.submits.mu.Lock()
			defer srv.submits.mu.Unlock()
			return len(srv.submits.waiting)
		}
	)
	gate := gateCommits(t, &srv.submits)
	gate.set(func(k int) {
		mu.Lock()
		first := len(sizes) == 0
		sizes = append(sizes, k)
		mu.Unlock()
		// Gives up quietly: the count of entries below tells.
		eventually.Within(20*time.Second, func() bool { return !first || waiting()+k >= n })
	})
	e0 := entriesOf(srv, state.CmdSubmit)

	type answer struct {
		name string
		id   uint64
		err  error
	}
	answers := make(chan answer, n)
	for i := range n {
		go func() {
			sp := spec(1, jobspec.ModeSingleNode, 1)
			sp.Name = fmt.Sprintf("job%d", i)
			req := api.SubmitRequest{Spec: wire.ToAPI(sp), Cwd: "/tmp", User: "alice", UID: 1000, GID: 1000}
			if i == 0 {
				req.RequestID = "twice"
			}
			r, err := c.Submit(ctx, req)
			answers <- answer{sp.Name, r.JobID, err}
		}()
	}
	ids := map[uint64]string{}
	var twice uint64
	for range n {
		a := <-answers
		if a.err != nil {
			t.Fatalf("submit %s: %v", a.name, a.err)
		}
		if other, dup := ids[a.id]; dup {
			t.Fatalf("%s and %s both got job %d", a.name, other, a.id)
		}
		ids[a.id] = a.name
		if a.name == "job0" {
			twice = a.id
		}
	}
	for id, name := range ids {
		j, _, err := c.Job(ctx, id, 0, 0)
		if err != nil || j.Name != name || j.State != api.JobPending {
			t.Errorf("job %d: %+v, %v; want %s PENDING", id, j, err, name)
		}
	}
	entries := entriesOf(srv, state.CmdSubmit) - e0
	mu.Lock()
	t.Logf("%d submits took %v entries, of sizes %v", n, entries, sizes)
	if entries > 2 || len(sizes) != int(entries) {
		t.Errorf("%d submits took %v raft entries (groups %v), want at most 2", n, entries, sizes)
	}
	mu.Unlock()

	gate.set(nil)
	sp := spec(1, jobspec.ModeSingleNode, 1)
	sp.Name = "job0"
	again, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(sp), Cwd: "/tmp", User: "alice", UID: 1000, GID: 1000, RequestID: "twice"})
	if err != nil || again.JobID != twice {
		t.Fatalf("retried request: job %d, %v; want its first job %d", again.JobID, err, twice)
	}
}
