package sched

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
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
	req := api.SubmitRequest{User: "bench", Spec: spec(1, jobspec.ModeSingleNode, 1)}
	var total, reps, plans float64
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		before := srv.raft.AppliedIndex()
		r0, p0 := entriesOf(srv, state.CmdReport)+entriesOf(srv, "reports"), entriesOf(srv, state.CmdPlan)
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
		reps += entriesOf(srv, state.CmdReport) + entriesOf(srv, "reports") - r0
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
