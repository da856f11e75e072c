package raftlog

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched/state"
)

// BenchmarkRestart100k measures a schedd restart with 100,000 jobs in
// state (RESTART_JOBS sets another number): a raft snapshot holding them
// plus a log tail of 2,000 submits, reopened into a fresh store (what
// `schedd` does at start before it serves). With RESTART_BATCH=N the
// jobs are submitted instead, N to an entry (as POST /v1/jobs/batch
// makes them), leaving raft's own snapshots to decide what a restart
// reads and what it replays. Run with -benchtime=3x; setup builds the
// state once.
//
//	RESTART_JOBS=1000000 go test ./sched/raftlog -run '^$' -bench Restart -benchtime 1x
//	RESTART_JOBS=1000000 RESTART_BATCH=1000 go test ./sched/raftlog -run '^$' -bench Restart -benchtime 1x
func BenchmarkRestart100k(b *testing.B) {
	jobs, tail, batch := 100_000, 2_000, 0
	for name, p := range map[string]*int{"RESTART_JOBS": &jobs, "RESTART_BATCH": &batch} {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				b.Fatalf("%s: %v", name, err)
			}
			*p = n
		}
	}
	dir := b.TempDir()
	// Closing may wait for a snapshot of the whole state that raft has
	// begun: give it the time.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	st := state.New()
	l, err := Open(ctx, Config{Dir: dir, LogOutput: io.Discard, ShutdownTimeout: 10 * time.Minute}, st)
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	if batch > 0 {
		for i := 0; i < jobs; i += batch {
			var js []*state.Job
			for range min(batch, jobs-i) {
				js = append(js, benchJob(0, now))
			}
			if _, err := l.Apply(context.Background(), state.Command{Time: now, Act: state.Submit{Jobs: js}}); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		d := state.Dump{}
		for i := 1; i <= jobs; i++ {
			d.Jobs = append(d.Jobs, benchJob(uint64(i), now))
		}
		if err := l.Restore(context.Background(), d); err != nil {
			b.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < tail; i += 32 {
				j := benchJob(0, now)
				if _, err := l.Apply(context.Background(), state.Command{Time: now, Act: state.Submit{Jobs: []*state.Job{j}}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := len(st.Snapshot().Jobs()); n != jobs+tail {
		b.Fatalf("%d jobs before restart, want %d", n, jobs+tail)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	st = nil
	l = nil
	b.ResetTimer()
	var total, cpu time.Duration
	var heap, peak uint64
	for range b.N {
		base := heapLive()
		stopPeak := peakHeap()
		start, startCPU := time.Now(), cpuTime()
		st := state.New()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		l, err := Open(ctx, Config{Dir: dir, LogOutput: io.Discard}, st)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		cpu += cpuTime() - startCPU
		peak = max(peak, stopPeak()-base)
		b.StopTimer()
		if n := len(st.Snapshot().Jobs()); n != jobs+tail {
			b.Fatalf("%d jobs after restart, want %d", n, jobs+tail)
		}
		heap += heapLive() - base
		_ = l.Close()
		runtime.KeepAlive(st)
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/restart")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/restart")
	b.ReportMetric(float64(heap)/float64(b.N)/float64(jobs+tail), "heap-bytes/job")
	b.ReportMetric(float64(peak)/float64(1<<20), "MiB-peak-heap")
}

// heapLive is the live heap after a full collection.
func heapLive() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// peakHeap samples the heap in use every 20 ms until the function it
// returns is called, which answers the most it saw.
func peakHeap() func() uint64 {
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var most uint64
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			most = max(most, ms.HeapInuse)
			select {
			case <-stop:
				done <- most
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(stop); return <-done }
}

// cpuTime is the CPU time this process has taken, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchJob(id uint64, now time.Time) *state.Job {
	k := uuid.NewString()
	return &state.Job{ID: id, Name: fmt.Sprintf("job%d", id), User: "alice", UID: 1000, GID: 1000, Cwd: "/home/alice",
		Partition: "default", Account: "vision", State: api.JobPending, Reason: api.ReasonPriority, SessionID: k, Submitted: now,
		Spec: state.Spec{Image: "pytorch-2.3", Command: []string{"python", "train.py"},
			Cluster: state.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
			Workdir: "/home/work", Env: map[string]string{"EPOCHS": "10"}},
		Containers: []state.Container{{Role: "main", Idx: 1, Host: "main1", Image: "pytorch-2.3", Command: []string{"python", "train.py"},
			CPUMilli: 1000, Memory: 1 << 30, KernelID: k, State: api.ContainerPending}},
	}
}
