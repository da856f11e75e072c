package e2e

import (
	"fmt"
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

// bsubAs runs bsub as u in dir with stdin and extra environment, and
// returns the job id it printed.
func (c *devCluster) bsubAs(t *testing.T, u e2eUser, dir, stdin string, env []string, args ...string) uint64 {
	t.Helper()
	cmd := exec.Command(bin+"/bsub", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "TROUPE_ADDR="+c.addr), env...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid}}
	out, err := cmd.CombinedOutput()
	m := submitted.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("bsub %q: %v: %s", args, err, out)
	}
	id, _ := strconv.ParseUint(m[1], 10, 64)
	return id
}

// TestScriptJobs runs LSF-style jobs as nobody: a #BSUB script on stdin
// and a command line. Each runs as the submitter, in the submit
// directory (writable there), with the submitter's environment, on the
// host image, and its output lands where -o says.
func TestScriptJobs(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 1, "2")
	base := searchable(t)
	dir := dirOf(t, nobodyUser, 0o755, base, "submit")
	env := []string{"TROUPE_E2E_VAR=from-the-submitter", "TROUPE_E2E_HIDDEN=secret"}

	script := `#!/bin/sh
#BSUB -J scripted
#BSUB -n 1 -W 5
#BSUB -o logs.%J.%x.out
#BSUB -M 256MB
#BSUB -env "all, ~TROUPE_E2E_HIDDEN"
echo "pwd=$(pwd) uid=$(id -u) var=$TROUPE_E2E_VAR hidden=${TROUPE_E2E_HIDDEN:-unset} args=$*"
echo written > result.txt
`
	id := c.bsubAs(t, nobodyUser, dir, script, env)
	j := c.waitState(id, 2*time.Minute, func(j api.Job) bool { return j.State.Terminal() })
	out, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("logs.%d.scripted.out", id)))
	want := fmt.Sprintf("pwd=%s uid=65534 var=from-the-submitter hidden=unset args=\n", dir)
	if j.State != api.JobCompleted || string(out) != want {
		t.Errorf("script job %d: %s (%s), output %q, want %q", id, j.State, j.Reason, out, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "result.txt")); err != nil || string(b) != "written\n" {
		t.Errorf("result.txt in the submit directory: %q, %v", b, err)
	}

	// A command line, run by /bin/sh -c as LSF runs it.
	id = c.bsubAs(t, nobodyUser, dir, "", env, "-n", "2", "-W", "5", "-o", "cmd.%J.out", "echo", "$TROUPE_E2E_VAR", ">", "cmd.txt;", "echo", "done")
	j = c.waitState(id, 2*time.Minute, func(j api.Job) bool { return j.State.Terminal() })
	out, _ = os.ReadFile(filepath.Join(dir, fmt.Sprintf("cmd.%d.out", id)))
	b, _ := os.ReadFile(filepath.Join(dir, "cmd.txt"))
	if j.State != api.JobCompleted || string(out) != "done\n" || string(b) != "from-the-submitter\n" {
		t.Errorf("command job %d: %s (%s), output %q, cmd.txt %q", id, j.State, j.Reason, out, b)
	}

	// -cwd names another directory; a failing script ends FAILED with its code.
	other := dirOf(t, nobodyUser, 0o755, base, "other")
	id = c.bsubAs(t, nobodyUser, dir, "", nil, "-cwd", other, "-o", "x.out", "pwd; exit 3")
	j = c.waitState(id, 2*time.Minute, func(j api.Job) bool { return j.State.Terminal() })
	out, _ = os.ReadFile(filepath.Join(other, "x.out"))
	if j.State != api.JobFailed || j.ExitCode != 3 || string(out) != other+"\n" {
		t.Errorf("-cwd job %d: %s exit %d (%s), output %q", id, j.State, j.ExitCode, j.Reason, out)
	}

	// -o into a directory that does not exist yet: made as the user, as
	// LSF makes it, and the job runs.
	id = c.bsubAs(t, nobodyUser, dir, "", nil, "-o", "logs/deep/%J.out", "echo logged")
	j = c.waitState(id, 2*time.Minute, func(j api.Job) bool { return j.State.Terminal() })
	out, _ = os.ReadFile(filepath.Join(dir, "logs", "deep", fmt.Sprintf("%d.out", id)))
	fi, err := os.Stat(filepath.Join(dir, "logs"))
	if j.State != api.JobCompleted || string(out) != "logged\n" || err != nil || fi.Sys().(*syscall.Stat_t).Uid != nobodyUser.uid {
		t.Errorf("-o logs/deep/%%J.out job %d: %s (%s), output %q, logs/ %v", id, j.State, j.Reason, out, err)
	}
}

// TestStopResume: bstop stops every process of a running job's container
// (bjobs: USUSP), bresume lets it go on (RUN), and bkill -d ends it DONE.
func TestStopResume(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 1, "2")
	base := searchable(t)
	dir := dirOf(t, nobodyUser, 0o755, base, "stop")
	id := c.bsubAs(t, nobodyUser, dir, "", nil, "-o", "ticks.out", "i=0; while :; do i=$((i+1)); echo $i > ticks; sleep 0.1; done")
	c.waitState(id, time.Minute, func(j api.Job) bool { return j.State == api.JobRunning })
	ticks := func() string { b, _ := os.ReadFile(filepath.Join(dir, "ticks")); return string(b) }
	stat := func() string {
		out, _, _ := c.run(dir, "bjobs", "-noheader", "-o", "stat", strconv.FormatUint(id, 10))
		return strings.TrimSpace(out)
	}
	if !waitFor(30*time.Second, func() bool { return ticks() != "" }) {
		t.Fatal("the job never ticked")
	}
	runAs := func(name string, args ...string) string {
		cmd := exec.Command(bin+"/"+name, args...)
		cmd.Env = append(os.Environ(), "TROUPE_ADDR="+c.addr)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUser.uid, Gid: nobodyUser.gid}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %q: %v: %s", name, args, err, out)
		}
		return string(out)
	}
	if out := runAs("bstop", strconv.FormatUint(id, 10)); out != fmt.Sprintf("Job <%d> is being stopped\n", id) {
		t.Errorf("bstop: %q", out)
	}
	if !waitFor(30*time.Second, func() bool { return stat() == "USUSP" }) {
		t.Fatalf("bjobs after bstop: %q, want USUSP", stat())
	}
	// Stopped: the count stands still over half a second (after the
	// signal has arrived); the half second is the observation.
	if !waitFor(25*time.Second, func() bool { a := ticks(); time.Sleep(500 * time.Millisecond); return ticks() == a }) {
		t.Fatal("the job's processes still run after bstop")
	}
	stopped := ticks()
	time.Sleep(time.Second) // a second stopped: the count must not move
	if ticks() != stopped {
		t.Fatalf("ticks went on while stopped: %q → %q", stopped, ticks())
	}
	runAs("bresume", strconv.FormatUint(id, 10))
	if !waitFor(30*time.Second, func() bool { return stat() == "RUN" && ticks() != stopped }) {
		t.Fatalf("after bresume: %s, ticks %q (were %q)", stat(), ticks(), stopped)
	}
	runAs("bkill", "-d", strconv.FormatUint(id, 10))
	j := c.waitState(id, time.Minute, func(j api.Job) bool { return j.State.Terminal() })
	if j.State != api.JobCompleted || stat() != "DONE" {
		t.Errorf("after bkill -d: %s, bjobs %s; want COMPLETED, DONE", j.State, stat())
	}

	// bstop right after bsub, as a tool's hold does: whatever the job's
	// state then (PEND, or placed and starting, which bjobs shows as
	// RUN), it is suspended, and bresume lets it run.
	os.Remove(filepath.Join(dir, "ticks"))
	id = c.bsubAs(t, nobodyUser, dir, "", nil, "-o", "ticks2.out", "i=0; while :; do i=$((i+1)); echo $i > ticks; sleep 0.1; done")
	if out := runAs("bstop", strconv.FormatUint(id, 10)); out != fmt.Sprintf("Job <%d> is being stopped\n", id) {
		t.Fatalf("bstop right after bsub: %q", out)
	}
	if st := stat(); st != "USUSP" && st != "PSUSP" {
		t.Fatalf("bjobs right after bstop: %q, want USUSP or PSUSP", st)
	}
	j = c.waitState(id, time.Minute, func(j api.Job) bool { return j.State == api.JobRunning || j.State == api.JobHeld })
	if j.State == api.JobRunning {
		if st := stat(); st != "USUSP" {
			t.Fatalf("bjobs of the job stopped before it started: %q, want USUSP", st)
		}
		// Stopped as it started: the count stands still.
		if !waitFor(10*time.Second, func() bool { a := ticks(); time.Sleep(500 * time.Millisecond); return ticks() == a }) {
			t.Fatalf("the job stopped before it started runs: ticks %q", ticks())
		}
	}
	runAs("bresume", strconv.FormatUint(id, 10))
	if !waitFor(30*time.Second, func() bool { return stat() == "RUN" && ticks() != "" }) {
		t.Fatalf("after bresume: %s, ticks %q", stat(), ticks())
	}
	runAs("bkill", strconv.FormatUint(id, 10))
}
