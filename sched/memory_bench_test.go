package sched

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/procfs"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/httpapi"
)

// heapLive is the live heap after a full collection.
func heapLive() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// vmRSS is this process's resident set (0 where /proc cannot tell).
func vmRSS() uint64 {
	st, err := procfs.Self()
	if err != nil {
		return 0
	}
	return st.RSS * uint64(os.Getpagesize())
}

// BenchmarkQueuedServerMemory is schedd's memory for a backlog: a
// server (raft on disk, its loop running, no nodes) is sent
// SCHEDD_MEM_JOBS (default 100,000) one-container jobs, bench-scale's
// backlog jobs, in two forms:
//
//   - form=jobs: each job its own submit with its own request id (32
//     at a time, as many bsub would), the raft log grouping them as it
//     commits;
//   - form=array: one job array of that many elements.
//
// Once the loop has placed the last one in the queue (its queue
// position known), bytes/job is the live heap the backlog added over
// the server's own, per job or element: the rows, the state's indexes
// and what the leader keeps beside them. MiB-rss is the process's
// resident set then (the benchmark's own garbage included).
//
//	SCHEDD_MEM_JOBS=100000 go test ./sched -run '^$' -bench QueuedServerMemory -benchtime 1x
func BenchmarkQueuedServerMemory(b *testing.B) {
	n := 100_000
	if s := os.Getenv("SCHEDD_MEM_JOBS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatalf("SCHEDD_MEM_JOBS: %v", err)
		}
	}
	spec := func(array bool) api.SubmitRequest {
		j := jobspec.Job{Name: "backlog", Image: "host", Command: []string{"true"},
			Env:       map[string]string{"TROUPE_SIM_DURATION": "1s"},
			Cluster:   jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
			Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30}}
		if array {
			j.Array = &jobspec.Array{Range: fmt.Sprintf("1-%d", n)}
		}
		return api.SubmitRequest{Cwd: "/tmp", User: "root", Spec: wire.ToAPI(j)}
	}
	for _, form := range []string{"jobs", "array"} {
		b.Run("form="+form, func(b *testing.B) {
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				srv, err := Open(ctx, Config{DataDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
					MaxQueuedPerUser: -1, MaxQueuedInputPerUser: -1})
				if err != nil {
					b.Fatal(err)
				}
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { defer wg.Done(); srv.Run(ctx) }()
				base := heapLive()
				var last atomic.Uint64
				if form == "array" {
					r, err := srv.Submit(ctx, spec(true))
					if err != nil {
						b.Fatal(err)
					}
					last.Store(r.JobID)
				} else {
					var next atomic.Int64
					var sub sync.WaitGroup
					for range 32 {
						sub.Add(1)
						go func() {
							defer sub.Done()
							for next.Add(1) <= int64(n) {
								req := spec(false)
								req.RequestID = auth.NewID() + auth.NewID() // as the client sends it
								r, err := srv.Submit(ctx, req)
								if err != nil {
									b.Error(err)
									return
								}
								for {
									l := last.Load()
									if r.JobID <= l || last.CompareAndSwap(l, r.JobID) {
										break
									}
								}
							}
						}()
					}
					sub.Wait()
				}
				ref := api.JobRef{ID: last.Load()}
				if form == "array" {
					ref = api.JobRef{ID: last.Load(), Element: true, Index: 1}
				}
				eventually.True(b, 5*time.Minute, "the last job placed in the queue by a pass", func() bool {
					j, _, err := srv.Job(ctx, httpapi.Wait{}, ref)
					return err == nil && j.QueuePosition > 0
				})
				live := heapLive()
				b.ReportMetric(float64(live-base)/float64(n), "bytes/job")
				b.ReportMetric(float64(vmRSS())/float64(1<<20), "MiB-rss")
				cancel()
				wg.Wait()
				srv.Close()
			}
		})
	}
}
