package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
	"github.com/troupe-hpc/troupe/internal/procfs"
)

// scaleRow is a queued one-container job as admission makes it of
// bench-scale's backlog jobs (cmd/troupe-nodesim): image "host", command
// "true", one environment variable, 1 cpu and 1 GiB, its own session id.
func scaleRow(i int) *Job {
	k := uuid.NewString()
	return &Job{RequestID: uuid.NewString(), Name: fmt.Sprintf("backlog-%d", i), User: "root", Cwd: "/tmp",
		Partition: "backlog", Account: "root", SessionID: k, State: lifecycle.JobPending, Reason: "Priority",
		InputBytes: 60,
		Spec: Spec{Image: "host", Command: []string{"true"}, Cluster: Cluster{Size: 1, Mode: "single-node"},
			Env: map[string]string{"TROUPE_SIM_DURATION": "1s"}},
		Containers: []Container{{Host: "main1", Role: RoleMain, Idx: 1, Image: "host", Command: []string{"true"},
			CPUMilli: 1000, Memory: 1 << 30, KernelID: k, State: lifecycle.ContainerPending}},
	}
}

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

// writeHeapProfile writes the heap's profile to file: what is live
// while the store is (go test -memprofile writes it once the benchmark
// has let the store go).
func writeHeapProfile(b *testing.B, file string) {
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkQueuedMemory fills a store with individually submitted
// one-container jobs (one Submit entry each, encoded and decoded as the
// raft log carries it, so that each row is what a replica's FSM holds)
// and reports the live heap they take: bytes/job is the state's cost of
// a queued job, its row and its entries in the indexes. The sizes are
// STATE_MEM_JOBS (comma-separated, default 100000); STATE_MEM_PROFILE
// names a file for the heap profile taken while the store is full:
//
//	STATE_MEM_JOBS=100000,1000000 go test ./sched/state -run '^$' -bench QueuedMemory -benchtime 1x
func BenchmarkQueuedMemory(b *testing.B) {
	sizes := []int{100_000}
	if s := os.Getenv("STATE_MEM_JOBS"); s != "" {
		sizes = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				b.Fatalf("STATE_MEM_JOBS: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			for b.Loop() {
				base := heapLive()
				st := New()
				now := time.Now().UTC()
				for i := range n {
					c := Command{Version: SchemaVersion, Time: now, Act: Submit{Jobs: []*Job{scaleRow(i)}}}
					raw, err := json.Marshal(c)
					if err != nil {
						b.Fatal(err)
					}
					var d Command
					if err := json.Unmarshal(raw, &d); err != nil {
						b.Fatal(err)
					}
					if _, err := st.Apply(uint64(i+1), d); err != nil {
						b.Fatal(err)
					}
				}
				live := heapLive()
				if f := os.Getenv("STATE_MEM_PROFILE"); f != "" {
					writeHeapProfile(b, f)
				}
				b.ReportMetric(float64(live-base)/float64(n), "bytes/job")
				b.ReportMetric(float64(vmRSS())/float64(1<<20), "MiB-rss")
				if got := st.Snapshot().Queued(); got != n {
					b.Fatalf("%d queued, want %d", got, n)
				}
				runtime.KeepAlive(st)
			}
		})
	}
}

// BenchmarkReadDump restores a store from a snapshot of 100,000 queued
// jobs (scaleRow) as raft's snapshots are read (RestoreFrom): what a
// restart does before it replays the log's tail (sched/raftlog's
// BenchmarkRestart100k is the whole).
func BenchmarkReadDump(b *testing.B) {
	d := Dump{Version: SchemaVersion}
	for i := range 100_000 {
		j := scaleRow(i)
		j.ID = uint64(i + 1)
		d.Jobs = append(d.Jobs, j)
	}
	var buf bytes.Buffer
	if err := WriteDump(&buf, d); err != nil {
		b.Fatal(err)
	}
	d = Dump{}
	b.SetBytes(int64(buf.Len()))
	for b.Loop() {
		if err := New().RestoreFrom(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
}
