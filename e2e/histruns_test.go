package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestExitWhileNodeletDown: a job whose container ends while its
// nodelet is away (SIGQUIT: the container runs on) ends when it ended,
// not when the restarted nodelet reports it: its run time is the
// container's, in bjob and bhist.
func TestExitWhileNodeletDown(t *testing.T) {
	needRunc(t)
	// One node in this machine's network, so that the test can start
	// its nodelet again as schedd --dev did.
	c := startCluster(t, 1, "1", "--dev-hosts", "shared", "--node-timeout", "60s")
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o777)
	id, _ := c.submit(dir, "short", `
job "short" {
  image   = "host"
  output  = "short-%j.out"
  command = ["/bin/sh", "-c", "echo up; sleep 3; echo done"]
}`)
	out := filepath.Join(dir, "short-"+strconv.FormatUint(id, 10)+".out")
	said := func(what string) bool { b, _ := os.ReadFile(out); return strings.Contains(string(b), what) }
	j := c.waitState(id, 60*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
	if !waitFor(30*time.Second, func() bool { return said("up") }) {
		t.Fatal("the job's container wrote nothing in 30s")
	}

	nl := nodeletPID(t, c.cmd.Process.Pid, j.Containers[0].Node)
	argv := procStrings(t, nl, "cmdline")
	env := procStrings(t, nl, "environ")
	if err := syscall.Kill(nl, syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	if !waitFor(30*time.Second, func() bool { return !alive(nl) }) {
		t.Fatalf("nodelet %d did not detach in 30s", nl)
	}
	if !waitFor(30*time.Second, func() bool { return said("done") }) {
		t.Fatal("the job's container did not finish in 30s while its nodelet was away")
	}
	// The node stays silent a while after the container ended: what
	// the test measures is that this gap is not counted as run time.
	away := 4 * time.Second
	time.Sleep(away)
	if j := c.job(id); j.State != api.JobRunning {
		t.Fatalf("job %s while its nodelet is away, want RUNNING", j.State)
	}

	restarted := time.Now()
	var log bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	j = c.waitState(id, 60*time.Second, func(j api.Job) bool { return j.State.Terminal() })
	run := j.Ended.Sub(j.Started)
	t.Logf("the job ran %s (its command: 3s); its nodelet came back %s after its start", run.Round(time.Millisecond), restarted.Sub(j.Started).Round(time.Millisecond))
	// Its start is when schedd heard of it, a little after the command
	// began: the run may read a little under 3s, never near 3s + away.
	if j.State != api.JobCompleted || run < 2*time.Second || run > 3*time.Second+away/2 || !j.Ended.Before(restarted) {
		t.Errorf("job ended %s after %s, at %v (nodelet back at %v); want COMPLETED after about 3s, before the restart\nnodelet log:\n%s",
			j.State, run, j.Ended, restarted, log.String())
	}
	hist, _, _ := c.run(dir, "bhist", "-o", "json", strconv.FormatUint(id, 10))
	if !strings.Contains(hist, `"run": `+strconv.FormatInt(int64(run), 10)) {
		t.Errorf("bhist's run time is not the job's %s: %s", run, hist)
	}
}

// procStrings reads /proc/pid/name's NUL-separated strings (cmdline,
// environ).
func procStrings(t *testing.T, pid int, name string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}
