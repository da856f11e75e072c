package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// openDir is a t.TempDir that uid 65534 may work in.
func openDir(t *testing.T) string {
	t.Helper()
	return tempDirMode(t, 0o777)
}

// TestAttachSocketNotRedirected (issue 19 item 1): an interactive job of
// uid 65534 replaces its attach socket with a symlink to schedd's socket,
// as an attacker would to speak to schedd as root through the nodelet.
// The next battach must reach the job's own terminal, never schedd.
// Before, the root nodelet followed the symlink and dialled schedd.
func TestAttachSocketNotRedirected(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 1, "1")
	dir := openDir(t)
	job := filepath.Join(dir, "evil.hcl")
	if err := os.WriteFile(job, []byte(`job "evil" {
  cluster {
    size = 1
    mode = "single-node"
  }
  resources {
    cpu    = 1
    memory = "128MiB"
  }
  image = "host"
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	schedd := strings.TrimPrefix(c.addr, "unix://")
	attack := fmt.Sprintf(`for d in /.troupe/status /.troupe/private; do rm -f $d/attach.sock; ln -s %s $d/attach.sock 2>/dev/null && echo "linked $d"; done; echo attacked; while read l; do echo "job-saw:$l"; done`, schedd)
	p := c.startPTY(t, dir, 24, 80, 65534, "bsub", "-I", job, "--", "sh", "-c", attack)
	p.expect("attacked", time.Minute)
	m := submitted.FindStringSubmatch(strings.TrimLeft(p.output(), "\r\n"))
	if m == nil {
		t.Fatalf("bsub -I did not name its job:\n%s", p.output())
	}
	jid := m[1]
	p.typeLine("\x1d") // detach; the job goes on
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("detaching: exit %d, terminal:\n%s", code, p.output())
	}
	// Attach again: what is typed must reach the job's terminal, not
	// schedd (whose HTTP answer battach would take for a bad frame).
	back := c.startPTY(t, dir, 24, 80, 65534, "battach", jid)
	back.typeLine("GET /v1/jobs HTTP/1.0\n")
	back.expect("job-saw:GET /v1/jobs HTTP/1.0", 30*time.Second)
	back.typeLine("\x1d")
	back.wait(30 * time.Second)
	id, _ := strconv.ParseUint(jid, 10, 64)
	if _, errOut, code := c.runAs(65534, dir, "bkill", jid); code != 0 {
		t.Fatalf("bkill: %s", errOut)
	}
	c.waitState(id, time.Minute, func(j api.Job) bool { return j.State.Terminal() })
}

// TestExitFIFODoesNotHang (issue 19 item 3): a job of uid 65534 puts a
// FIFO (and a directory in the way of the temporary file) where
// troupe-init used to write its exit status, then is killed: it ends
// promptly. Before, the root nodelet blocked forever in open() of the
// FIFO: the job stayed RUNNING past bkill and its walltime.
func TestExitFIFODoesNotHang(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 1, "1")
	dir := openDir(t)
	id, _ := c.submitAs(65534, 65534, dir, "fifo", `
job "fifo" {
  cluster {
    size = 1
    mode = "single-node"
  }
  resources {
    cpu    = 1
    memory = "128MiB"
  }
  image   = "host"
  command = ["sh", "-c", "for d in /.troupe/status /.troupe/private; do rm -f $d/exit; mkfifo $d/exit; mkdir $d/exit.tmp; ln -s /dev/zero $d/exit.tmp/x; done; echo ready; exec sleep 600"]
  output  = "fifo-%j.out"
}`)
	out := filepath.Join(dir, fmt.Sprintf("fifo-%d.out", id))
	c.waitState(id, time.Minute, func(j api.Job) bool { return j.State == api.JobRunning })
	waitFor(30*time.Second, func() bool {
		b, _ := os.ReadFile(out)
		return strings.Contains(string(b), "ready")
	})
	if _, errOut, code := c.runAs(65534, dir, "bkill", strconv.FormatUint(id, 10)); code != 0 {
		t.Fatalf("bkill: %s", errOut)
	}
	j := c.waitState(id, time.Minute, func(j api.Job) bool { return j.State.Terminal() })
	t.Logf("job ended %s after bkill", j.State)
}
