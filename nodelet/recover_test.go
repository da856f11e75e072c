package nodelet

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"context"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runc"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

func needRunc(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: re-attaching needs runc, which needs root")
	}
	if _, err := runc.Find(""); err != nil {
		t.Skip("SKIP: re-attaching needs the runc binary")
	}
}

// initPid is the host pid of container id's init, from runc state; 0
// when runc does not know it or it is not running.
func initPid(t *testing.T, stateDir, id string) int {
	t.Helper()
	return initPidIn(t, filepath.Join(stateDir, "run", "runc"), id)
}

// initPidIn is initPid for runc's state root root.
func initPidIn(t *testing.T, root, id string) int {
	t.Helper()
	out, err := exec.Command("runc", "--root", root, "state", id).Output()
	if err != nil {
		return 0
	}
	var st struct {
		Status string
		Pid    int
	}
	if json.Unmarshal(out, &st) != nil || st.Status != "running" {
		return 0
	}
	return st.Pid
}

// TestAgentReattachesAfterRestart: a nodelet that detaches (SIGQUIT)
// leaves its containers running; the next one on the same state dir
// re-attaches: the same processes go on, schedd never sees the job
// leave RUNNING, and the containers end normally with their codes,
// including one that ended while no nodelet ran.
func TestAgentReattachesAfterRestart(t *testing.T) {
	needRunc(t)
	s := newTestSchedd(t)
	state := t.TempDir()
	_, _, detach := startAgentCause(t, s, RuntimeRunc, state)
	cwd := t.TempDir()
	data := t.TempDir() // data/go lets long end, after the restart
	long := s.submit(t, cwd, func(j *jobspec.Job) {
		j.Mounts = []jobspec.Mount{{Name: "data", Source: data, Target: "/data"}}
	}, sh("echo up; while [ ! -e /data/go ]; do sleep 0.1; done; echo done; exit 7"))
	short := s.submit(t, cwd, nil, sh("sleep 1; exit 4"))
	s.waitState(t, long, "main1", api.ContainerRunning)
	s.waitState(t, short, "main1", api.ContainerRunning)
	id := s.containerIDs(t, long)[0]
	pid := initPid(t, state, id)
	if pid == 0 {
		t.Fatalf("container %s not running under runc", id)
	}
	nLong := len(s.states(long, "main1"))

	detach()
	if got := initPid(t, state, id); got != pid {
		t.Fatalf("after detach: init pid %d, want %d still running", got, pid)
	}
	if got := s.states(long, "main1"); len(got) != nLong {
		t.Errorf("detaching reported %+v", got[nLong:])
	}
	shortID := s.containerIDs(t, short)[0]
	eventually.True(t, 10*time.Second, "the short job's container ending while no nodelet runs",
		func() bool { return initPid(t, state, shortID) == 0 })

	restarted := time.Now()
	cfg, _ := startAgentIn(t, s, RuntimeRunc, state)
	if j := s.waitJob(t, long, func(api.Job) bool { return true }); j.State != api.JobRunning {
		t.Errorf("after restart job %d is %s, want RUNNING", long, j.State)
	}
	if got := initPid(t, state, id); got != pid {
		t.Errorf("after restart: init pid %d, want %d", got, pid)
	}
	if u := s.waitState(t, short, "main1", api.ContainerExited); u.ExitCode != 4 || u.At.IsZero() || !u.At.Before(restarted) {
		t.Errorf("container that ended while no nodelet ran: exit %d at %v (nodelet back at %v); want 4, before the restart", u.ExitCode, u.At, restarted)
	}
	if err := os.WriteFile(filepath.Join(data, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if u := s.waitState(t, long, "main1", api.ContainerExited); u.ExitCode != 7 {
		t.Errorf("re-attached container: exit %d, want 7", u.ExitCode)
	}
	j := s.waitJob(t, long, func(j api.Job) bool { return j.State.Terminal() })
	if j.State != api.JobFailed || j.ExitCode != 7 {
		t.Errorf("job ended %s exit %d, want FAILED 7", j.State, j.ExitCode)
	}
	out := runtimetest.ReadFile(t, filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", long)))
	if out != "up\ndone" {
		t.Errorf("output = %q, want both lines (one written while no nodelet ran)", out)
	}
	for _, u := range s.states(long, "main1") {
		if u.State == api.ContainerFailed || u.State == api.ContainerKilled {
			t.Errorf("re-attached container reported %s: %s", u.State, u.Message)
		}
	}
	assertNothingLeft(t, cfg, RuntimeRunc, append(s.containerIDs(t, long), s.containerIDs(t, short)...))
}

// TestAgentStopsWhatScheddKilledMeanwhile: a job killed while its
// nodelet was away is stopped by the next nodelet, and nothing of it is
// left (processes, bundle, cgroups, session network).
func TestAgentStopsWhatScheddKilledMeanwhile(t *testing.T) {
	needRunc(t)
	s := newTestSchedd(t)
	state := t.TempDir()
	_, _, detach := startAgentCause(t, s, RuntimeRunc, state)
	id := s.submit(t, t.TempDir(), nil, sh("sleep 600"), sh("sleep 600"))
	s.waitState(t, id, "main1", api.ContainerRunning)
	s.waitState(t, id, "sub1", api.ContainerRunning)
	ids := s.containerIDs(t, id)
	var pids []int
	for _, c := range ids {
		pids = append(pids, initPid(t, state, c))
	}
	detach()
	if _, err := s.cli.Kill(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	for i, c := range ids {
		if got := initPid(t, state, c); got != pids[i] || got == 0 {
			t.Fatalf("%s: init pid %d after detach, want %d", c, got, pids[i])
		}
	}
	cfg, _ := startAgentIn(t, s, RuntimeRunc, state)
	if j := s.waitJob(t, id, func(j api.Job) bool { return j.State.Terminal() }); j.State != api.JobCancelled {
		t.Errorf("killed job ended %s", j.State)
	}
	assertNothingLeft(t, cfg, RuntimeRunc, ids)
	for _, p := range pids {
		if eventually.Within(5*time.Second, func() bool { return syscall.Kill(p, 0) != nil || isZombie(p) }) {
			continue
		}
		t.Errorf("init pid %d still alive", p)
	}
	if left := runtimetest.FindProcs(strings.Join(ids[:1], "")); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] == "Z"
}
