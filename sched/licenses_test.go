package sched

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/nodelet/nodesim"
	"github.com/troupe-hpc/troupe/sched/admission"
	"github.com/troupe-hpc/troupe/sched/state"
)

// TestLicenseCountUnderConcurrentSubmits: 200 jobs each asking for one
// seat of a 5-seat license, submitted at once to a real controller (raft
// on disk) and run by simulated nodes with room for all of them: the
// state, sampled on every change, never shows more than 5 of them
// holding a seat, and they all run.
func TestLicenseCountUnderConcurrentSubmits(t *testing.T) {
	const jobs, seats = 200, 5
	dir := t.TempDir()
	parts := filepath.Join(dir, "partitions.hcl")
	writeFile(t, parts, `partition "batch" { nodes = ["*"] }
license "matlab" { count = 5 }
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := Open(ctx, Config{DataDir: filepath.Join(dir, "data"), PartitionsFile: parts,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); <-done; srv.Close() })
	c, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := nodesim.New(nodesim.Config{Addr: hs.URL, Nodes: 4, CPU: 64, Memory: 256 << 30}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	simCtx, stopSim := context.WithCancel(ctx)
	simDone := make(chan struct{})
	go func() { _ = sim.Run(simCtx); close(simDone) }()
	defer func() { stopSim(); <-simDone }()

	// Sample every state the store goes through, as fast as it changes.
	var most, sawLicensesReason, ended int
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for ctx.Err() == nil {
			v := srv.Store().Snapshot()
			holding, fin := 0, 0
			for _, j := range v.Jobs() {
				switch {
				case j.State.Terminal():
					fin++
				case j.State == api.JobPending || j.State == api.JobHeld:
					if j.Reason == api.ReasonLicenses {
						sawLicensesReason++
					}
				default: // placed, preparing or running
					holding += j.Licenses["matlab"]
				}
			}
			most, ended = max(most, holding), fin
			if fin == jobs {
				return
			}
			_, ws := v.Index()
			wctx, wcancel := context.WithTimeout(ctx, time.Second)
			_ = ws.WatchCtx(wctx)
			wcancel()
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	for i := 0; i < jobs; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sp := jobspec.Job{Name: "solve", Image: "host", Command: []string{"true"},
				Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode}, Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30},
				Env: map[string]string{nodesim.EnvDuration: "100ms"}, Licenses: map[string]int{"matlab": 1}}
			if _, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(sp), User: "ada", UID: 1000, GID: 1000}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("submit: %v", err)
	}
	select {
	case <-sampled:
	case <-time.After(90 * time.Second):
		cancel()
		<-sampled
		t.Fatalf("after 90s %d of %d jobs ended", ended, jobs)
	}
	t.Logf("%d jobs over %d seats: at most %d held a seat at once", jobs, seats, most)
	if most > seats {
		t.Fatalf("%d jobs held a seat of a %d-seat license at once", most, seats)
	}
	if most < 2 || sawLicensesReason == 0 {
		t.Errorf("no contention seen: at most %d at once, reason Licenses seen %d times", most, sawLicensesReason)
	}
	for _, j := range srv.Store().Snapshot().Jobs() {
		if j.State != api.JobCompleted {
			t.Errorf("job %d ended %s (%s)", j.ID, j.State, j.Reason)
		}
	}
	if l := Licenses(srv.Store().Snapshot()); len(l) != 1 || l[0] != (api.License{Name: "matlab", Total: seats, Free: seats}) {
		t.Errorf("licenses after the run: %+v", l)
	}
}

// TestLicenseCountLowered: a reconfig that lowers a count below what
// running jobs hold leaves them running and starts nothing that asks for
// the license until they hold less than the new count.
func TestLicenseCountLowered(t *testing.T) {
	parts := filepath.Join(t.TempDir(), "partitions.hcl")
	writeFile(t, parts, `partition "batch" { nodes = ["*"] }
license "matlab" { count = 3 }
`)
	srv, c := clusterWith(t, Config{PartitionsFile: parts})
	ctx := context.Background()
	register(t, c, "n1", 16)
	sp := spec(1, jobspec.ModeSingleNode, 1)
	sp.Licenses = map[string]int{"matlab": 1}
	var ids []uint64
	for range 4 {
		res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(sp), User: "ada", UID: 1000, GID: 1000})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.JobID)
	}
	for _, id := range ids[:3] {
		waitJob(t, c, id, func(j api.Job) bool { return j.State == api.JobScheduled })
	}
	waitJob(t, c, ids[3], func(j api.Job) bool { return j.Reason == api.ReasonLicenses })

	writeFile(t, parts, `partition "batch" { nodes = ["*"] }
license "matlab" { count = 1 }
`)
	res, err := srv.Reconfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := "license matlab: count 1 is below the 3 that running jobs hold; they run on, and no job that asks for it starts until they hold fewer than 1"; len(res.Warnings) != 1 || res.Warnings[0] != want {
		t.Errorf("reconfig warnings %q, want %q", res.Warnings, want)
	}
	if l := Licenses(srv.Store().Snapshot()); len(l) != 1 || l[0] != (api.License{Name: "matlab", Total: 1, Used: 3, Waiting: 1}) {
		t.Errorf("after the reconfig: %+v", l)
	}
	end := func(id uint64) {
		t.Helper()
		for _, st := range []api.ContainerState{api.ContainerRunning, api.ContainerExited} {
			if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: id, Host: "main1", State: st}}}); err != nil {
				t.Fatal(err)
			}
		}
		waitJob(t, c, id, func(j api.Job) bool { return j.State.Terminal() })
	}
	end(ids[0])
	end(ids[1]) // one held of one: still none free
	for _, id := range ids[2:3] {
		if j := waitJob(t, c, id, func(api.Job) bool { return true }); j.State != api.JobScheduled {
			t.Errorf("job %d holding a seat over the new count: %s", id, j.State)
		}
	}
	// A job without licenses, submitted after those ends, starts: the
	// pass that starts it saw them, and left the waiting job waiting.
	plain, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 1)), User: "ada", UID: 1000, GID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, plain.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	if j := waitJob(t, c, ids[3], func(api.Job) bool { return true }); j.State != api.JobPending || j.Reason != api.ReasonLicenses {
		t.Fatalf("job %d with 1 of 1 held: %s %s", ids[3], j.State, j.Reason)
	}
	end(ids[2])
	waitJob(t, c, ids[3], func(j api.Job) bool { return j.State == api.JobScheduled })
}

// TestLicensesRefusedInAMixedCluster: while the entries are written in
// a schema older than the licenses' (a peer of the previous release,
// which would count none, may read the log), a job that asks for
// licenses is refused by name and one that asks for none is not; once
// the cluster writes the licenses' schema both are taken.
func TestLicensesRefusedInAMixedCluster(t *testing.T) {
	with := &admission.Job{Licenses: map[string]int{"matlab": 1}}
	without := &admission.Job{}
	p := licenseSchemaProblem(with, state.OldestSchema)
	if p == nil || p.Path != "licenses" || !strings.Contains(p.Message, "rolling upgrade") {
		t.Fatalf("a job with licenses in schema %d: %+v, want a refusal at licenses naming the upgrade", state.OldestSchema, p)
	}
	if p := licenseSchemaProblem(with, state.LicenseSchema-1); p == nil {
		t.Errorf("a job with licenses in schema %d taken", state.LicenseSchema-1)
	}
	if p := licenseSchemaProblem(without, state.OldestSchema); p != nil {
		t.Errorf("a job without licenses in schema %d refused: %+v", state.OldestSchema, p)
	}
	if p := licenseSchemaProblem(with, state.SchemaVersion); p != nil {
		t.Errorf("a job with licenses in schema %d refused: %+v", state.SchemaVersion, p)
	}
}
