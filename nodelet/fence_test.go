package nodelet

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/nodelet/fence"
	"github.com/troupe-hpc/troupe/sched"
)

// TestAgentHeartbeatFollowsNodeTimeout: with no --heartbeat, a nodelet
// heartbeats as often as schedd's node timeout asks (issue 12 item 9: a
// short --node-timeout marked healthy idle nodes DOWN), and keeps a
// lease of half the timeout in its lease file.
func TestAgentHeartbeatFollowsNodeTimeout(t *testing.T) {
	const timeout = 1500 * time.Millisecond // heartbeats every T/8: room for a loaded machine
	s := newTestScheddWith(t, sched.Config{NodeTimeout: timeout})
	cfg, _, _ := startAgentCause(t, s, RuntimeProcess, t.TempDir(), func(c *Config) { c.Heartbeat = 0 })
	eventually.True(t, 10*time.Second, "the node registered", func() bool { return s.registered(cfg.Name) })
	// The node must stay UP for five timeouts: the duration is the test.
	end := time.Now().Add(5 * timeout)
	for time.Now().Before(end) {
		if n := s.srv.Store().Snapshot().Node(cfg.Name); n.State != api.NodeUp {
			t.Fatalf("idle healthy node is %s (reason %q) with node timeout %s", n.State, n.Reason, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	l, err := fence.Read(filepath.Join(cfg.StateDir, fence.FileName))
	if err != nil {
		t.Fatal(err)
	}
	left := l.Deadline - fence.Now()
	if l.Unfenced || left <= 0 || left > timeout/2 {
		t.Fatalf("lease %+v: %s left, want at most %s (half the node timeout) and not run out", l, left, timeout/2)
	}
}

// A lease's running out counts once, however often it is checked while
// it lasts and when the renewal that ends it comes; the next one counts
// again.
func TestLeaseLapsesCountedOnce(t *testing.T) {
	k := &leaseKeeper{path: filepath.Join(t.TempDir(), fence.FileName), owner: "test", log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	k.lease = fence.Lease{Owner: k.owner, Deadline: fence.Now() + time.Hour}
	if left, fenced, n := k.status(); !fenced || left <= 0 || n != 0 {
		t.Fatalf("fresh lease: left %v, fenced %v, lapses %d", left, fenced, n)
	}
	k.mu.Lock()
	k.lease.Deadline = fence.Now() - time.Second // ran out
	k.mu.Unlock()
	for range 3 {
		if k.valid() {
			t.Fatal("valid after the deadline")
		}
	}
	if !k.expired() {
		t.Fatal("not expired after the deadline")
	}
	if left, _, n := k.status(); left >= 0 || n != 1 {
		t.Fatalf("one lapse checked 5 times: left %v, lapses %d; want negative, 1", left, n)
	}
	if !k.grant(fence.Now(), api.NodeLease{Lease: time.Hour}) {
		t.Fatal("grant after the lapse: not reported as renewing an expired lease")
	}
	if left, _, n := k.status(); left <= 0 || n != 1 {
		t.Fatalf("after the renewal: left %v, lapses %d; want positive, 1", left, n)
	}
	// A lapse seen first by the renewal that ends it counts too.
	k.mu.Lock()
	k.lease.Deadline = fence.Now() - time.Millisecond
	k.mu.Unlock()
	k.grant(fence.Now(), api.NodeLease{Lease: time.Hour})
	if _, _, n := k.status(); n != 2 {
		t.Fatalf("lapses %d, want 2", n)
	}
	// No lease announced: not fenced, no lapse.
	k.grant(fence.Now(), api.NodeLease{})
	if _, fenced, n := k.status(); fenced || n != 2 {
		t.Fatalf("unfenced: fenced %v, lapses %d", fenced, n)
	}
}
