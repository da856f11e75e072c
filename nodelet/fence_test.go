package nodelet

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
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
	deadline := time.Now().Add(10 * time.Second)
	for !s.registered(cfg.Name) {
		if time.Now().After(deadline) {
			t.Fatal("node never registered")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
