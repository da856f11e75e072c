package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
)

// envJob is a 3-container session whose every container prints its
// hostname and BACKENDAI_* environment; main1 waits for the subs to print.
func envJob(mode string, cpu int) string {
	return fmt.Sprintf(`
job "env-%[1]s" {
  cluster {
    size = 3
    mode = "%[1]s"
  }
  resources {
    cpu    = %[2]d
    memory = "128MiB"
  }
  image   = "host"
  command = ["sh", "-c", "echo HOST=$(hostname); env | grep ^BACKENDAI_ | sort; sleep 2"]
  role "sub" {
    command = ["sh", "-c", "echo HOST=$(hostname); env | grep ^BACKENDAI_ | sort"]
  }
  output = "env-%%j.%%h.out"
}
`, mode, cpu)
}

func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("container output: %v", err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	return env
}

func TestClusterSessions(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 2, "4")

	for _, tt := range []struct {
		mode  string
		cpu   int
		nodes int // distinct nodes the session must span
	}{
		{"single-node", 1, 1},
		{"multi-node", 2, 2}, // 3 × 2 cpus do not fit one 4-cpu node
	} {
		t.Run(tt.mode, func(t *testing.T) {
			dir := t.TempDir()
			id, code := c.submit(dir, "env", envJob(tt.mode, tt.cpu), "--wait")
			if code != 0 {
				t.Fatalf("bsub --wait exited %d", code)
			}
			j := c.job(id)
			if j.State != api.JobCompleted {
				t.Fatalf("job %d ended %s (%s)", id, j.State, j.Reason)
			}
			nodes := map[string]bool{}
			for _, ct := range j.Containers {
				nodes[ct.Node] = true
			}
			if len(nodes) != tt.nodes {
				t.Errorf("session spans %d nodes %v, want %d", len(nodes), nodes, tt.nodes)
			}
			if j.SessionID == "" || j.SessionID != j.Containers[0].KernelID {
				t.Errorf("session id %q is not main1's kernel id %q", j.SessionID, j.Containers[0].KernelID)
			}
			want := []struct {
				host, role, idx, rank string
			}{{"main1", "main", "1", "0"}, {"sub1", "sub", "1", "1"}, {"sub2", "sub", "2", "2"}}
			for i, w := range want {
				env := readEnv(t, filepath.Join(dir, fmt.Sprintf("env-%d.%s.out", id, w.host)))
				check := map[string]string{
					"HOST":                         w.host,
					"BACKENDAI_CLUSTER_SIZE":       "3",
					"BACKENDAI_CLUSTER_HOSTS":      "main1,sub1,sub2",
					"BACKENDAI_CLUSTER_REPLICAS":   "main:1,sub:2",
					"BACKENDAI_CLUSTER_HOST":       w.host,
					"BACKENDAI_CLUSTER_IDX":        w.idx,
					"BACKENDAI_CLUSTER_ROLE":       w.role,
					"BACKENDAI_CLUSTER_LOCAL_RANK": w.rank,
					"BACKENDAI_CLUSTER_MODE":       tt.mode,
					"BACKENDAI_KERNEL_ID":          j.Containers[i].KernelID,
					"BACKENDAI_SESSION_ID":         j.SessionID,
				}
				for k, v := range check {
					if env[k] != v {
						t.Errorf("%s: %s=%q, want %q", w.host, k, env[k], v)
					}
				}
			}
		})
	}

	t.Run("exit code", func(t *testing.T) {
		_, code := c.submit(t.TempDir(), "fail", `
job "fail" {
  image   = "host"
  command = ["sh", "-c", "exit 3"]
}`, "--wait")
		if code != 3 {
			t.Fatalf("bsub --wait exited %d, want main1's 3", code)
		}
	})

	t.Run("walltime", func(t *testing.T) {
		dir := t.TempDir()
		start := time.Now()
		id, code := c.submit(dir, "late", `
job "late" {
  walltime = "2s"
  cluster {
    size = 2
    mode = "multi-node"
  }
  image   = "host"
  command = ["sleep", "4343"]
}`, "--wait")
		j := c.job(id)
		if code != 1 || j.State != api.JobTimeout {
			t.Fatalf("bsub --wait exited %d, job %s (%s); want 1 and TIMEOUT", code, j.State, j.Reason)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("a 2s walltime ended the job after %v", d)
		}
		if running("sleep 4343") {
			t.Error("the timed-out job's process is still running")
		}
	})

	// Issue 12 item 5: a fork bomb in a CPU-throttled container ends
	// TIMEOUT at its walltime; the stop freezes the cgroup and lifts the
	// quota before it kills, so throttling cannot outlast it.
	t.Run("fork bomb past walltime", func(t *testing.T) {
		dir := t.TempDir()
		start := time.Now()
		id, code := c.submit(dir, "bomb", `
job "bomb" {
  walltime = "3s"
  resources {
    cpu = 0.5
  }
  image   = "host"
  command = ["sh", "-c", "bomb4345() { bomb4345 | bomb4345 & }; bomb4345; exec sleep 4345"]
}`, "--wait")
		j := c.job(id)
		if code != 1 || j.State != api.JobTimeout {
			t.Fatalf("bsub --wait exited %d, job %s (%s); want 1 and TIMEOUT", code, j.State, j.Reason)
		}
		t.Logf("a fork bomb with a 3s walltime ended TIMEOUT %v after its submit", time.Since(start).Round(100*time.Millisecond))
		if running("bomb4345") {
			t.Error("the fork bomb's processes outlived the job")
		}
	})

	t.Run("pending until room frees", func(t *testing.T) {
		dir := t.TempDir()
		big, _ := c.submit(dir, "big", `
job "big" {
  cluster {
    size = 2
    mode = "multi-node"
  }
  resources { cpu = 4 }
  image   = "host"
  command = ["sleep", "3"]
}`)
		c.waitState(big, 30*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
		small, _ := c.submit(dir, "small", `
job "small" {
  image   = "host"
  command = ["true"]
}`)
		// The reason comes with the next scheduling pass after the submit.
		j := c.waitState(small, 30*time.Second, func(j api.Job) bool {
			return j.State != api.JobPending || j.Reason == api.ReasonResources
		})
		if j.State != api.JobPending || j.Reason != api.ReasonResources {
			t.Fatalf("job %d: %s (%s), want PENDING (Resources) while the cluster is full", small, j.State, j.Reason)
		}
		out, _, _ := c.run(dir, "bqueue")
		if !strings.Contains(out, "Resources") {
			t.Errorf("bqueue does not show the reason:\n%s", out)
		}
		j = c.waitState(small, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
		b := c.job(big)
		if j.State != api.JobCompleted || b.State != api.JobCompleted {
			t.Fatalf("big %s, small %s; want both COMPLETED", b.State, j.State)
		}
		// Room frees when big's main1 ends its 3 s sleep (its sub may
		// still be stopping: an ended container holds nothing).
		if d := j.Started.Sub(b.Started); d < 2500*time.Millisecond {
			t.Errorf("small started %v after big did; big held the whole cluster for 3s", d)
		}
	})

	t.Run("bkill leaves nothing", func(t *testing.T) {
		dir := t.TempDir()
		id, _ := c.submit(dir, "long", `
job "long" {
  cluster {
    size = 3
    mode = "multi-node"
  }
  image   = "host"
  command = ["sleep", "4242"]
}`)
		c.waitState(id, 30*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
		if !running("sleep 4242") {
			t.Fatal("the job's process is not running while the job is RUNNING")
		}
		out, errOut, code := c.run(dir, "bkill", strconv.FormatUint(id, 10))
		if code != 0 || !strings.Contains(out, fmt.Sprintf("Job <%d> is being terminated", id)) {
			t.Fatalf("bkill: exit %d %q %q", code, out, errOut)
		}
		j := c.waitState(id, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
		if j.State != api.JobCancelled {
			t.Fatalf("killed job ended %s", j.State)
		}
		if running("sleep 4242") {
			t.Error("the killed job's process is still running")
		}
		// Teardown follows the report of the exit: give it its moment.
		var left string
		if !eventually.Within(20*time.Second, func() bool { left = leftovers(c.dir, false); return left == "" }) {
			t.Errorf("left behind by the killed job:\n%s", left)
		}
	})
}

func running(pattern string) bool {
	return exec.Command("pgrep", "-f", pattern).Run() == nil
}
