package raftlog

import (
	"context"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/sched/state"
)

// BenchmarkDurableSubmit measures acknowledged submissions per second:
// each Apply returns only once its entry is fsynced and applied. Raft
// groups the entries of concurrent callers into one disk write.
func BenchmarkDurableSubmit(b *testing.B) {
	l, _ := open(b, b.TempDir())
	defer l.Close()
	job := &state.Job{Name: "bench", Containers: []state.Container{{KernelID: "k"}}}
	b.SetParallelism(64)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Apply(context.Background(), state.Command{Time: time.Now(), Act: state.Submit{Jobs: []*state.Job{job}}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "submits/s")
}
