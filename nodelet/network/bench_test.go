package network

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkOneContainer measures what the session network costs a
// one-container job: Attach before the container starts, Detach after it
// ended (issue 17), with the default network (egress) and without
// (sealed: a partition with egress = false), and with the egress
// namespaces prepared ahead by a pool of DefaultPool (pool.go) or made
// on the job's path (pool=0). Under "paced" the pool refills between
// jobs (outside the timer), as it does on a node whose jobs last longer
// than a namespace takes to prepare; "burst" runs them back to back, and
// pooled-% tells how many Attach calls found one ready. setup-ms and
// teardown-ms are the means of each half, setup-p50-ms and setup-p90-ms
// the quantiles of Attach.
func BenchmarkOneContainer(b *testing.B) {
	b.Run("egress/pool=0", func(b *testing.B) { benchOne(b, true, 0, false) })
	b.Run(fmt.Sprintf("egress/pool=%d/paced", DefaultPool), func(b *testing.B) { benchOne(b, true, DefaultPool, true) })
	b.Run(fmt.Sprintf("egress/pool=%d/burst", DefaultPool), func(b *testing.B) { benchOne(b, true, DefaultPool, false) })
	b.Run("sealed", func(b *testing.B) { benchOne(b, false, 0, false) })
}

func benchOne(b *testing.B, egress bool, pool int, paced bool) {
	needNetNS(b)
	nodeAddr(b)
	m, err := New(b.TempDir(), "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.SetPool(pool); err != nil {
		b.Fatal(err)
	}
	if err := m.Cleanup(); err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	refilled := func() {
		if pool == 0 {
			return
		}
		b.StopTimer()
		for deadline := time.Now().Add(time.Minute); m.Pooled() < pool; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("pool holds %d of %d after a minute", m.Pooled(), pool)
			}
		}
		b.StartTimer()
	}
	refilled()
	var teardown time.Duration
	setups := make([]time.Duration, 0, b.N)
	hits := 0
	b.ResetTimer()
	for i := range b.N {
		if paced {
			refilled()
		}
		job := testJob(uint64(i+1), uint32(4096+i%200), 1)
		id := fmt.Sprintf("j%d-main1", job.ID)
		ready := m.Pooled()
		t0 := time.Now()
		if _, err := m.Attach(job, "main1", id, egress); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if pool > 0 && ready > 0 && m.Pooled() < ready {
			hits++ // approximate under burst: the filler may add one meanwhile
		}
		if err := m.Detach(job, "main1", id); err != nil {
			b.Fatal(err)
		}
		setups, teardown = append(setups, t1.Sub(t0)), teardown+time.Since(t1)
	}
	b.StopTimer()
	reportSetups(b, setups)
	b.ReportMetric(float64(teardown.Microseconds())/1000/float64(b.N), "teardown-ms")
	if pool > 0 && !paced {
		b.ReportMetric(100*float64(hits)/float64(b.N), "pooled-%")
	}
}

// reportSetups reports the mean, median and 90th percentile of setups.
func reportSetups(b *testing.B, setups []time.Duration) {
	var sum time.Duration
	for _, d := range setups {
		sum += d
	}
	slices.Sort(setups)
	q := func(p float64) float64 {
		return float64(setups[int(p*float64(len(setups)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(sum.Microseconds())/1000/float64(len(setups)), "setup-ms")
	b.ReportMetric(q(0.5), "setup-p50-ms")
	b.ReportMetric(q(0.9), "setup-p90-ms")
}

// BenchmarkSetupDuringTeardown measures the setup of a session's first
// container (its bridge, veth and namespace) while another session on
// the node tears its network down (issue 17: one slot's teardown must
// not stall the next slot's setup). setup-ms is the mean Attach of B,
// started as A's two containers start to Detach; teardown-ms the mean
// of A's two Detach calls together, as their caller waits for them.
func BenchmarkSetupDuringTeardown(b *testing.B) {
	needNetNS(b)
	nodeAddr(b)
	m, err := New(b.TempDir(), "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Cleanup(); err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	var setup, teardown time.Duration
	b.ResetTimer()
	for i := range b.N {
		a := testJob(uint64(2*i+1), uint32(4096+(2*i)%200), 2)
		bj := testJob(uint64(2*i+2), uint32(4096+(2*i+1)%200), 2)
		for _, h := range []string{"main1", "sub1"} {
			if _, err := m.Attach(a, h, fmt.Sprintf("j%d-%s", a.ID, h), true); err != nil {
				b.Fatal(err)
			}
		}
		started, done := make(chan struct{}), make(chan error, 1)
		go func() {
			var errs []error
			close(started)
			t0 := time.Now()
			for _, h := range []string{"sub1", "main1"} {
				errs = append(errs, m.Detach(a, h, fmt.Sprintf("j%d-%s", a.ID, h)))
			}
			teardown += time.Since(t0)
			done <- errors.Join(errs...)
		}()
		<-started
		t0 := time.Now()
		if _, err := m.Attach(bj, "main1", fmt.Sprintf("j%d-main1", bj.ID), true); err != nil {
			b.Fatal(err)
		}
		setup += time.Since(t0)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if err := m.Detach(bj, "main1", fmt.Sprintf("j%d-main1", bj.ID)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(setup.Microseconds())/1000/float64(b.N), "setup-ms")
	b.ReportMetric(float64(teardown.Microseconds())/1000/float64(b.N), "teardown-ms")
}
