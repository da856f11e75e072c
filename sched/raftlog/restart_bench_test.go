package raftlog

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
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
// `schedd` does at start before it serves). Run with -benchtime=3x;
// setup builds the state once.
//
//	RESTART_JOBS=1000000 go test ./sched/raftlog -run '^$' -bench Restart -benchtime 1x
func BenchmarkRestart100k(b *testing.B) {
	jobs, tail := 100_000, 2_000
	if s := os.Getenv("RESTART_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("RESTART_JOBS: %v", err)
		}
		jobs = n
	}
	dir := b.TempDir()
	l, st := open(b, dir)
	d := state.Dump{}
	now := time.Now().UTC()
	for i := 1; i <= jobs; i++ {
		d.Jobs = append(d.Jobs, benchJob(uint64(i), now))
	}
	if err := l.Restore(context.Background(), d); err != nil {
		b.Fatal(err)
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
	b.ResetTimer()
	var total time.Duration
	for range b.N {
		start := time.Now()
		st := state.New()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		l, err := Open(ctx, Config{Dir: dir, LogOutput: io.Discard}, st)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		if n := len(st.Snapshot().Jobs()); n != jobs+tail {
			b.Fatalf("%d jobs after restart, want %d", n, jobs+tail)
		}
		b.StopTimer()
		_ = l.Close()
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/restart")
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
