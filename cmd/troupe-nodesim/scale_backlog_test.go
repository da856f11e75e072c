package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/nodelet/nodesim"
)

// backlogPartitions is the partitions file of a run with a backlog: the
// simulated nodes (sim*) are the default partition, where the throughput
// jobs run, and one more node (backlog1) is partition "backlog", where a
// job holding all of it keeps every queued job waiting for Resources, as
// a full cluster's queue waits.
const backlogPartitions = `partition "default" {
  nodes   = ["sim*"]
  default = true
}
partition "backlog" {
  nodes = ["backlog*"]
}
`

// backlogJob is a job of partition backlog: cpu cores on one node,
// running d once started.
func backlogJob(name string, cpu float64, d time.Duration) api.SubmitRequest {
	return api.SubmitRequest{Cwd: "/tmp", User: "root", Spec: wire.ToAPI(jobspec.Job{Name: name, Image: "host", Partition: "backlog",
		Command: []string{"true"}, Env: map[string]string{nodesim.EnvDuration: d.String()},
		Cluster:   jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: cpu, Memory: 1 << 30}})}
}

// blockBacklog submits a job that holds all 4 cores of the backlog node
// for a day and waits until it runs.
func blockBacklog(b *testing.B, c *client.Client) {
	ctx := context.Background()
	res, err := c.Submit(ctx, backlogJob("backlog-blocker", 4, 24*time.Hour))
	if err != nil {
		b.Fatalf("submitting the job that fills the backlog node: %v", err)
	}
	eventually.NoError(b, 5*time.Minute, "the job filling the backlog node RUNNING", func() error {
		j, _, err := c.Job(ctx, res.JobID, 0, 0)
		if err == nil && j.State == api.JobRunning {
			return nil
		}
		return fmt.Errorf("%s %s (%v)", j.State, j.Reason, err)
	})
}

// submitBacklog submits n one-core jobs to partition backlog,
// POST /v1/jobs/batch 1,000 at a time from 4 submitters; they wait for
// Resources behind the blocker. It returns the time it took.
func submitBacklog(b *testing.B, c *client.Client, n int) time.Duration {
	const batch = 1000
	began := time.Now()
	next := make(chan int)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			var first error
			for i := range next {
				if first != nil {
					continue // let the others' batches go
				}
				reqs := make([]api.SubmitRequest, 0, batch)
				for j := i; j < min(i+batch, n); j++ {
					reqs = append(reqs, backlogJob(fmt.Sprintf("backlog-%d", j), 1, time.Second))
				}
				if _, err := c.SubmitBatch(context.Background(), reqs); err != nil {
					first = fmt.Errorf("POST /v1/jobs/batch of jobs %d-%d: %w", i, i+len(reqs)-1, err)
				}
			}
			errs <- first
		}()
	}
	for i := 0; i < n; i += batch {
		next <- i
	}
	close(next)
	for range 4 {
		if err := <-errs; err != nil {
			b.Fatalf("submitting the backlog: %v", err)
		}
	}
	return time.Since(began)
}

// listQuery is one of bqueue's questions and its label.
type listQuery struct {
	label string
	q     url.Values
}

// listQueries are what bqueue asks schedd (GET /v1/jobs, filtered on
// the server) with a backlog: every job not ended (bqueue -u all), the
// default partition's (bqueue -p default, the backlog left out by the
// partition), and the running ones (bqueue -s RUN, by the state index).
var listQueries = []listQuery{
	{"bqueue -u all", url.Values{"ended": {"false"}}},
	{"bqueue -u all -p default", url.Values{"ended": {"false"}, "partition": {"default"}}},
	{"bqueue -u all -s RUN", url.Values{"ended": {"false"}, "state": {string(api.JobRunning)}}},
	{"bqueue -u all -s PEND -p backlog (first 100)", url.Values{"ended": {"false"}, "state": {string(api.JobPending)}, "partition": {"backlog"}, "limit": {"100"}}},
}

// queryLatency asks q n times one after another and returns the median
// and how many jobs the answer held.
func queryLatency(b *testing.B, c *client.Client, q url.Values, n int) (time.Duration, int) {
	var took []time.Duration
	jobs := 0
	for range n {
		t := time.Now()
		l, err := c.JobsWhere(context.Background(), q, 0, 0)
		if err != nil {
			b.Fatalf("GET /v1/jobs?%s: %v", q.Encode(), err)
		}
		took, jobs = append(took, time.Since(t)), len(l.Jobs)
	}
	slices.Sort(took)
	return took[len(took)/2], jobs
}
