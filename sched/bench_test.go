package sched

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/admission"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/state"
)

// BenchmarkSubmitAPI measures durable submissions per second through the
// whole path users take: HTTP/JSON on the unix socket, validation, raft
// (bbolt fsync, batched across concurrent requests), the state store.
// Target (docs/scale.md, "Targets"): ≥ 5,000 jobs/s.
func BenchmarkSubmitAPI(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := Open(ctx, Config{DataDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	sock := filepath.Join(b.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	c, err := client.New("unix://" + sock)
	if err != nil {
		b.Fatal(err)
	}
	req := api.SubmitRequest{Cwd: "/tmp", User: "bench", Spec: wire.ToAPI(jobspec.Job{Name: "bench", Image: "host",
		Command: []string{"true"}, Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30}})}
	b.SetParallelism(32)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Submit(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "submits/s")
}

// BenchmarkSubmitArray100k submits job arrays of 100,000 elements through
// the API (a unix socket, raft on disk): one log entry and one row per
// array plus the first window of element rows (state.ArrayWindow), so
// the time per array does not grow with its size.
func BenchmarkSubmitArray100k(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := Open(ctx, Config{DataDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	sock := filepath.Join(b.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	c, err := client.New("unix://" + sock)
	if err != nil {
		b.Fatal(err)
	}
	req := api.SubmitRequest{Cwd: "/tmp", User: "bench", Spec: wire.ToAPI(jobspec.Job{Name: "sweep", Image: "host",
		Command: []string{"true"}, Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30}})}
	for _, maxRunning := range []int{0, 10} {
		b.Run(fmt.Sprintf("max_running=%d", maxRunning), func(b *testing.B) {
			req.Spec.Array = &api.ArraySpec{Range: "1-100000", MaxRunning: maxRunning}
			for b.Loop() {
				res, err := c.Submit(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				if p := srv.Store().Snapshot().Job(res.JobID); p == nil || p.Array == nil || p.Array.Count != 100000 {
					b.Fatalf("job %d is not an array of 100,000", res.JobID)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/array")
		})
	}
}

// BenchmarkPassArrays is one scheduling pass (the core's snapshot built
// from the state, then core.Schedule) over 100 nodes of 4 cpus with ten
// arrays of 100,000 one-cpu elements pending: the pass sees each array's
// window of element rows (and places 400 of them), not its 100,000
// elements.
func BenchmarkPassArrays(b *testing.B) {
	ctx := context.Background()
	srv, err := Open(ctx, Config{DataDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	for i := range 100 {
		reg := api.NodeRegister{Name: fmt.Sprintf("n%03d", i), Addr: "127.0.0.1", Runtime: "process",
			Capacity: api.Resources{CPUMilli: 4000, Memory: 64 << 30}}
		if _, err := srv.Register(ctx, reg); err != nil {
			b.Fatal(err)
		}
	}
	for range 10 {
		req := api.SubmitRequest{Cwd: "/tmp", User: "bench", Spec: wire.ToAPI(jobspec.Job{Name: "sweep", Image: "host",
			Command: []string{"true"}, Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
			Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30},
			Array:     &jobspec.Array{Range: "1-100000"}})}
		if _, err := srv.Submit(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	v := srv.Store().Snapshot()
	now := srv.cfg.Clock()
	snap := coreSnapshot(v, srv.nodes.open(v), now)
	if len(snap.Queue) != 10*state.ArrayWindow {
		b.Fatalf("queue of %d, want %d", len(snap.Queue), 10*state.ArrayWindow)
	}
	for b.Loop() {
		snap := coreSnapshot(v, srv.nodes.open(v), now)
		_ = core.Schedule(snap, now)
	}
}

// indexBenchState is a state with node n1 running 4 jobs among others
// that have nothing to do with it: ended ones on n2 (waiting for their
// purge), then queued ones.
func indexBenchState(b *testing.B, ended, queued int) *state.Store {
	b.Helper()
	job := func(id uint64, st api.JobState, node string) *state.Job {
		c := rowContainer(jobspec.Container{Host: "main1", Role: jobspec.RoleMain, Idx: 1,
			Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30}})
		c.KernelID = fmt.Sprint("k", id)
		c.Node = node
		if node != "" {
			c.State = api.ContainerRunning
			if st.Terminal() {
				c.State = api.ContainerExited
			}
		}
		return &state.Job{ID: id, Name: "t", User: "ada", UID: 1000, Partition: DefaultPartition, State: st,
			Containers: []state.Container{c}, SessionID: c.KernelID, ModifyIndex: id}
	}
	d := state.Dump{Version: state.SchemaVersion}
	for _, n := range []string{"n1", "n2"} {
		d.Nodes = append(d.Nodes, &state.Node{Name: n, State: api.NodeUp, Capacity: state.Resources{CPUMilli: 64000, Memory: 256 << 30}})
	}
	id := uint64(0)
	for i := range ended + queued {
		id++
		if i < ended {
			d.Jobs = append(d.Jobs, job(id, api.JobCompleted, "n2"))
		} else {
			d.Jobs = append(d.Jobs, job(id, api.JobPending, ""))
		}
	}
	for range 4 {
		id++
		d.Jobs = append(d.Jobs, job(id, api.JobRunning, "n1"))
	}
	st := state.New()
	if err := st.Restore(d); err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkAssignments measures one node's assignments query (what each
// nodelet's long-poll answers) with 1,000 and 100,000 other jobs in the
// state, half ended and half queued: its cost follows the node's own
// jobs (the node index), not the state's size.
func BenchmarkAssignments(b *testing.B) {
	for _, others := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			st := indexBenchState(b, others/2, others/2)
			b.ResetTimer()
			for b.Loop() {
				if as := Assignments(st.Snapshot(), "n1"); len(as) != 4 {
					b.Fatalf("%d assignments, want 4", len(as))
				}
			}
		})
	}
}

// BenchmarkCoreSnapshotEnded measures building the scheduler core's
// input with 1,000 and 100,000 ended jobs waiting for their purge
// (beside 4 running and none queued): the state index leaves them out.
func BenchmarkCoreSnapshotEnded(b *testing.B) {
	for _, others := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			st := indexBenchState(b, others, 0)
			now := time.Now()
			b.ResetTimer()
			for b.Loop() {
				if snap := coreSnapshot(st.Snapshot(), nil, now); len(snap.Running) != 4 {
					b.Fatalf("%d running, want 4", len(snap.Running))
				}
			}
		})
	}
}

// BenchmarkCheckQueued measures submit's queue-limit check (per user and
// in total) with 1,000 and 100,000 other jobs, half ended and half
// queued by another user: the state keeps the counts (queue_counts),
// so the check is two lookups whatever the queue and the ended jobs.
func BenchmarkCheckQueued(b *testing.B) {
	for _, others := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			st := indexBenchState(b, others/2, others/2)
			s := &lifecycle{replica: &replica{cfg: Config{MaxQueuedPerUser: DefaultMaxQueuedPerUser, MaxQueued: 1 << 20}}}
			j := &admission.Job{User: "bob", UID: 1001}
			b.ResetTimer()
			for b.Loop() {
				if p := admission.QueueLimits(admitView{st.Snapshot(), &s.nodes}, s.admission(), j, nil); p != nil {
					b.Fatal(p)
				}
			}
		})
	}
}

// BenchmarkPassBacklog is the leader loop's work for one scheduling pass
// (the walltime check, the backlog brought up to date from the state's
// change feed, the core's snapshot built from it, core.Schedule) with
// 10,000, 100,000 and 1,000,000 jobs pending beside 10,000 ended ones
// waiting for their purge, one job held and one released between
// passes (not timed): what every state change costs a schedd with that
// backlog. The queue positions bqueue shows are worked out when read
// (BenchmarkQueuePosition). Target (docs/scale.md): ≤ 100 ms at
// 1,000,000.
func BenchmarkPassBacklog(b *testing.B) {
	for _, queued := range []int{10000, 100000, 1000000} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			st := indexBenchState(b, 10000, queued)
			now := time.Now()
			var bl backlog
			v, changes, whole := st.SnapshotChanges()
			bl.update(v, changes, whole) // the first pass reads every job, once
			index := uint64(1 << 40)
			b.ReportAllocs()
			b.ResetTimer()
			for k := 0; b.Loop(); k++ {
				b.StopTimer()
				// Two changes between passes: one job held, another released.
				id := uint64(10001 + k%queued)
				for _, act := range []state.Act{state.Hold{Job: state.JobRef{ID: id}}, state.Release{Job: state.JobRef{ID: id}}} {
					index++
					if _, err := st.Apply(index, state.Command{Version: state.SchemaVersion, Time: now, Act: act}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				v, changes, whole := st.SnapshotChanges()
				if whole || len(changes) != 2 {
					b.Fatalf("%d changes (whole: %v), want 2", len(changes), whole)
				}
				bl.update(v, changes, whole)
				if late, _ := v.Late(now); len(late) != 0 {
					b.Fatalf("%d late jobs, want none", len(late))
				}
				snap := bl.snapshot(v, nil, now)
				if len(snap.Queue) < min(queued, core.DefaultQueueDepth) {
					b.Fatalf("queue of %d, want at least %d", len(snap.Queue), min(queued, core.DefaultQueueDepth))
				}
				_ = core.Schedule(snap, now)
			}
		})
	}
}

// BenchmarkQueuePosition is one pending job's priority and queue
// position (what bqueue and bjob show of it) with 10,000, 100,000 and
// 1,000,000 jobs pending: worked out when read, from the backlog's
// groups, not for every job on every pass.
func BenchmarkQueuePosition(b *testing.B) {
	for _, queued := range []int{10000, 100000, 1000000} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			st := indexBenchState(b, 0, queued)
			now := time.Now()
			var bl backlog
			v, changes, whole := st.SnapshotChanges()
			bl.update(v, changes, whole)
			_ = bl.snapshot(v, nil, now)
			j := v.Job(uint64(queued / 2))
			b.ResetTimer()
			for b.Loop() {
				if r, ok := bl.rank(j); !ok || r.pos != queued/2 || r.len != queued {
					b.Fatalf("rank %+v (%v), want position %d of %d", r, ok, queued/2, queued)
				}
			}
		})
	}
}
