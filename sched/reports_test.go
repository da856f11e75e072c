package sched

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// entriesOf is how many raft entries of kind srv has committed.
func entriesOf(srv *Server, kind string) float64 {
	var m dto.Metric
	if err := srv.metrics.entries.WithLabelValues(kind).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// TestReportsShareEntries: nodelet reports that arrive while an entry is
// being committed share the next entry: 50 nodes each posting two
// reports over HTTP (and one stale report about a cancelled job) take
// far fewer raft entries than reports, every report is applied, each
// POST is answered as if its report were alone, and the stale one is
// dropped without failing the others.
func TestReportsShareEntries(t *testing.T) {
	const nodes = 50
	srv, c := cluster(t)
	ctx := context.Background()
	for i := range nodes {
		register(t, c, fmt.Sprintf("n%02d", i), 1)
	}
	for range nodes + 1 {
		if _, err := c.Submit(ctx, api.SubmitRequest{User: "ada", Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))}); err != nil {
			t.Fatal(err)
		}
	}
	// One job per 1-cpu node; the last one waits, and is cancelled.
	where := map[uint64]string{}
	for id := uint64(1); id <= nodes; id++ {
		j := waitJob(t, c, id, func(j api.Job) bool { return j.State == api.JobScheduled })
		where[id] = j.Containers[0].Node
	}
	if len(where) != nodes {
		t.Fatalf("placed on %v", where)
	}
	if _, err := c.Kill(ctx, nodes+1); err != nil {
		t.Fatal(err)
	}
	cancelled := waitJob(t, c, nodes+1, func(j api.Job) bool { return j.State == api.JobCancelled })

	// Hold the first entry until the other first reports wait behind it:
	// on a loaded machine the HTTP requests could otherwise trickle in
	// one commit at a time.
	var (
		mu      sync.Mutex
		sizes   []int
		waiting = func() int {
			srv.reports.mu.Lock()
			defer srv.reports.mu.Unlock()
			return len(srv.reports.waiting)
		}
	)
	gateCommits(t, &srv.reports).set(func(n int) {
		mu.Lock()
		first := len(sizes) == 0
		sizes = append(sizes, n)
		mu.Unlock()
		// Gives up quietly: the count of entries below tells.
		eventually.Within(20*time.Second, func() bool { return !first || waiting()+n >= nodes+1 })
	})
	r0 := entriesOf(srv, state.CmdReports)

	errs := make(chan error, nodes+1)
	report := func(node string, id uint64, st api.ContainerState) error {
		return c.Report(ctx, node, api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: id, Host: "main1", State: st}}})
	}
	for id, node := range where {
		go func() {
			err := report(node, id, api.ContainerPreparing)
			if err == nil {
				err = report(node, id, api.ContainerRunning)
			}
			errs <- err
		}()
	}
	go func() { errs <- report("n00", nodes+1, api.ContainerRunning) }()
	for range nodes + 1 {
		if err := <-errs; err != nil {
			t.Errorf("a report was refused: %v", err)
		}
	}

	for id := uint64(1); id <= nodes; id++ {
		if j := waitJob(t, c, id, func(api.Job) bool { return true }); j.State != api.JobRunning {
			t.Errorf("job %d is %s after its reports, want RUNNING", id, j.State)
		}
	}
	if j := waitJob(t, c, nodes+1, func(api.Job) bool { return true }); j.State != api.JobCancelled || j.ModifyIndex != cancelled.ModifyIndex || j.Containers[0].State != cancelled.Containers[0].State {
		t.Errorf("the stale report changed cancelled job %d: %s, container %s, index %d (was %d)", nodes+1, j.State, j.Containers[0].State, j.ModifyIndex, cancelled.ModifyIndex)
	}
	entries := entriesOf(srv, state.CmdReports) - r0
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d reports took %v entries, of sizes %v", 2*nodes+1, entries, sizes)
	// The first two entries hold the 51 first reports; the 50 second
	// ones take at most one entry each.
	if entries > nodes+2 || len(sizes) != int(entries) || len(sizes) < 2 || sizes[0]+sizes[1] != nodes+1 {
		t.Errorf("%d reports took %v raft entries (batches %v), want at most %d, the first two holding %d", 2*nodes+1, entries, sizes, nodes+2, nodes+1)
	}
}

// TestReportBatchCaps: an entry takes at most maxReportUpdates updates'
// worth of reports (the one that crosses it included), and at most
// maxReportBatch reports.
func TestReportBatchCaps(t *testing.T) {
	srv, _ := cluster(t)
	var (
		mu    sync.Mutex
		sizes []int
	)
	waiting := func() int {
		srv.reports.mu.Lock()
		defer srv.reports.mu.Unlock()
		return len(srv.reports.waiting)
	}
	gate := gateCommits(t, &srv.reports)
	run := func(reports, updates int) []int {
		mu.Lock()
		sizes = nil
		mu.Unlock()
		gate.set(func(n int) {
			mu.Lock()
			first := len(sizes) == 0
			sizes = append(sizes, n)
			mu.Unlock()
			// Gives up quietly: the sizes returned tell.
			eventually.Within(20*time.Second, func() bool { return !first || waiting()+n >= reports })
		})
		ups := make([]api.ContainerUpdate, updates)
		for i := range ups {
			ups[i] = api.ContainerUpdate{JobID: 1000 + uint64(i), Host: "main1", State: api.ContainerRunning} // no such jobs: dropped
		}
		var wg sync.WaitGroup
		for range reports {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := srv.Report(context.Background(), "n1", api.ContainerReport{Updates: ups}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), sizes...)
	}
	// The first entry takes what came before the committer looked (one
	// report, unless the machine is slow); the rest wait behind it and
	// go out per the caps.
	for _, c := range []struct{ reports, updates, per int }{
		{21, 100, 11}, // the 11th report crosses 1024 updates
		{maxReportBatch + 11, 1, maxReportBatch},
	} {
		got := run(c.reports, c.updates)
		want := []int{got[0]}
		for left := c.reports - got[0]; left > 0; left -= min(left, c.per) {
			want = append(want, min(left, c.per))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d reports of %d updates went out in entries of %v reports, want %v", c.reports, c.updates, got, want)
		}
	}
}

// fakeNode is a nodelet's view of schedd without a nodelet: it long-polls
// its assignments and, for each container placed on it, reports
// PREPARING, RUNNING and EXITED 0, one POST each, one POST in flight at a
// time (as nodelet's reporter sends).
func fakeNode(ctx context.Context, c *client.Client, name string) error {
	seen := map[string]bool{}
	var idx uint64
	for ctx.Err() == nil {
		as, err := c.Assignments(ctx, name, idx, 5*time.Second)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		idx = as.Index
		for _, a := range as.Assignments {
			for _, h := range a.Hosts {
				key := fmt.Sprintf("%d/%s", a.Job.ID, h)
				if seen[key] {
					continue
				}
				seen[key] = true
				for _, st := range []api.ContainerState{api.ContainerPreparing, api.ContainerRunning, api.ContainerExited} {
					rep := api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: a.Job.ID, Host: h, State: st}}}
					if err := c.Report(ctx, name, rep); err != nil {
						if ctx.Err() != nil {
							return nil
						}
						return err
					}
				}
			}
		}
	}
	return nil
}

// BenchmarkReportEntries runs 100 one-container jobs through submit,
// placement and three reports each (PREPARING, RUNNING, EXITED) from 20
// fake nodes over HTTP, submitted 10 at a time, and counts the raft
// entries they took: all of them, the reports' and the plans', per job.
func BenchmarkReportEntries(b *testing.B) {
	const jobs, nodes, parallel = 100, 20, 10
	srv, c := cluster(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range nodes {
		register(b, c, fmt.Sprintf("n%02d", i), 8)
	}
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fakeNode(ctx, c, fmt.Sprintf("n%02d", i)); err != nil {
				b.Error(err)
			}
		}()
	}
	defer wg.Wait()
	defer cancel()
	req := api.SubmitRequest{User: "bench", Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1))}
	var total, reps, plans float64
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		before := srv.raft.AppliedIndex()
		r0, p0 := entriesOf(srv, state.CmdReports), entriesOf(srv, state.CmdPlan)
		ids := make(chan uint64, jobs)
		var sub sync.WaitGroup
		for range parallel {
			sub.Add(1)
			go func() {
				defer sub.Done()
				for range jobs / parallel {
					res, err := c.Submit(ctx, req)
					if err != nil {
						b.Error(err)
						return
					}
					ids <- res.JobID
				}
			}()
		}
		sub.Wait()
		close(ids)
		for id := range ids {
			waitJob(b, c, id, func(j api.Job) bool { return j.State.Terminal() })
		}
		// The last report's entry is applied once its job has ended.
		total += float64(srv.raft.AppliedIndex() - before)
		reps += entriesOf(srv, state.CmdReports) - r0
		plans += entriesOf(srv, state.CmdPlan) - p0
	}
	el := time.Since(start)
	b.StopTimer()
	n := float64(b.N * jobs)
	b.ReportMetric(total/n, "entries/job")
	b.ReportMetric(reps/n, "report-entries/job")
	b.ReportMetric(plans/n, "plan-entries/job")
	b.ReportMetric(n/el.Seconds(), "jobs/s")
}
