package nodelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/eventually"
)

// TestSecondNodeletUnderTheSameNameRefused (issue 12 item 9): two live
// nodelets named node1, each with its own state directory: schedd keeps
// the first's registration; the first's restart (same state directory,
// same instance) registers again at once.
func TestSecondNodeletUnderTheSameNameRefused(t *testing.T) {
	s := newTestSchedd(t)
	dir1, dir2 := t.TempDir(), t.TempDir()
	instance := func(dir string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, instanceFile))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	registered := func() string {
		if n := s.srv.Store().Snapshot().Node("node1"); n != nil {
			return n.Instance
		}
		return ""
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		eventually.True(t, 10*time.Second, what, cond)
	}
	_, stop1 := startAgentIn(t, s, RuntimeProcess, dir1)
	waitFor("the first nodelet to register", func() bool { return registered() != "" })
	first := instance(dir1)
	if registered() != first {
		t.Fatalf("node1 registered by instance %q, want the first's %q", registered(), first)
	}
	_, stop2 := startAgentIn(t, s, RuntimeProcess, dir2)
	waitFor("the second nodelet's instance", func() bool { _, err := os.Stat(filepath.Join(dir2, instanceFile)); return err == nil })
	if instance(dir2) == first {
		t.Fatal("two state directories gave the same instance")
	}
	time.Sleep(time.Second) // the second retries registering meanwhile
	if got := registered(); got != first {
		t.Fatalf("node1 now registered by instance %q: the second nodelet took a live node's name", got)
	}
	// The first restarts: same instance, registered again at once.
	stop2()
	stop1()
	before := s.srv.Store().Snapshot().Node("node1").LastHeartbeat
	startAgentIn(t, s, RuntimeProcess, dir1)
	waitFor("the restarted first nodelet to register", func() bool {
		n := s.srv.Store().Snapshot().Node("node1")
		return n.LastHeartbeat.After(before) && n.Instance == first
	})
}
