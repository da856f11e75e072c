package network

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// BenchmarkOneContainer measures what the session network costs a
// one-container job: Attach before the container starts, Detach after it
// ended (issue 17), with the default network (egress) and without
// (sealed: a partition with egress = false). setup-ms and teardown-ms are
// the means of each half.
func BenchmarkOneContainer(b *testing.B) {
	b.Run("egress", func(b *testing.B) { benchOne(b, true) })
	b.Run("sealed", func(b *testing.B) { benchOne(b, false) })
}

func benchOne(b *testing.B, egress bool) {
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
		job := testJob(uint64(i+1), uint32(4096+i%200), 1)
		id := fmt.Sprintf("j%d-main1", job.ID)
		t0 := time.Now()
		if _, err := m.Attach(job, "main1", id, egress); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := m.Detach(job, "main1", id); err != nil {
			b.Fatal(err)
		}
		setup, teardown = setup+t1.Sub(t0), teardown+time.Since(t1)
	}
	b.ReportMetric(float64(setup.Microseconds())/1000/float64(b.N), "setup-ms")
	b.ReportMetric(float64(teardown.Microseconds())/1000/float64(b.N), "teardown-ms")
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
