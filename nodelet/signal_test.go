package nodelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/procfs"
)

// TestAgentSignalsOnceAcrossRestart: a signal request reaches the
// running container once; a nodelet that detaches and a new one that
// re-attaches (and reads the same request list from schedd) do not send
// it again, and a later request still arrives. The container's usage
// comes with its final report.
func TestAgentSignalsOnceAcrossRestart(t *testing.T) {
	needRunc(t)
	s := newTestSchedd(t)
	state := t.TempDir()
	_, _, detach := startAgentCause(t, s, RuntimeRunc, state)
	cwd := t.TempDir()
	id := s.submit(t, cwd, nil, sh(`trap 'echo usr1' USR1; trap 'echo usr2; exit 5' USR2; echo up; while :; do sleep 0.1; done`))
	s.waitJob(t, id, func(j api.Job) bool { return j.State == api.JobRunning })
	out := filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", id))
	waitOut := func(want string) string {
		t.Helper()
		var got string
		if !eventually.Within(15*time.Second, func() bool { b, _ := os.ReadFile(out); got = string(b); return strings.Contains(got, want) }) {
			t.Fatalf("output %q never held %q", got, want)
		}
		return got
	}
	waitOut("up")
	if _, err := s.cli.Signal(context.Background(), id, api.SignalJob{Signal: "USR1"}); err != nil {
		t.Fatal(err)
	}
	waitOut("usr1")

	detach()
	restarted := time.Now()
	startAgentIn(t, s, RuntimeRunc, state)
	// Registered, the new nodelet has adopted the job; the assignments it
	// fetches next hold the USR1 request it must not send again.
	eventually.True(t, 15*time.Second, "the new nodelet registered", func() bool {
		n := s.srv.Store().Snapshot().Node("node1")
		return n != nil && n.LastHeartbeat.After(restarted) // set by a registration
	})
	if _, err := s.cli.Signal(context.Background(), id, api.SignalJob{Signal: "SIGUSR2", Host: "main1"}); err != nil {
		t.Fatal(err)
	}
	got := waitOut("usr2")
	if n := strings.Count(got, "usr1"); n != 1 {
		t.Errorf("USR1 delivered %d times across the restart, want once:\n%s", n, got)
	}
	u := s.waitState(t, id, "main1", api.ContainerExited)
	if u.ExitCode != 5 || u.CPUTime <= 0 || u.MemPeak <= 0 {
		t.Errorf("final report: exit %d, cpu %v, peak %d; want 5 and usage", u.ExitCode, u.CPUTime, u.MemPeak)
	}
}

// TestAgentStopBeforeStart: a job suspended (bstop) after it was placed
// but before its container started has the container stopped as soon as
// it starts: its loop makes no progress until a CONT, then goes on. (The
// fake schedd gives no session network, so plain processes; the STOP
// itself reaches runc's containers as any bstop does.)
func TestAgentStopBeforeStart(t *testing.T) {
	f := newFakeSchedd()
	startFakeAgent(t, f, RuntimeProcess, t.TempDir())
	cwd := t.TempDir()
	count := filepath.Join(cwd, "count")
	job := fakeJob(t, 7, cwd, nil, sh(`i=0; while :; do i=$((i+1)); echo $i > `+count+`.new; mv `+count+`.new `+count+`; sleep 0.02; done`))
	job.Signals = []api.SignalRequest{{Seq: 1, Signal: int(syscall.SIGSTOP)}}
	f.assign(job)
	f.waitState(t, 7, "main1", api.ContainerRunning)
	read := func() string { b, _ := os.ReadFile(count); return string(b) }
	// Stopped: the kernel shows the job's loop in state T (stopped by
	// a signal), and its count stays where it was.
	stoppedNow := func() bool {
		for _, pid := range procfs.Descendants(os.Getpid(), 0) {
			if st, err := procfs.Read(pid); err == nil && st.State == 'T' {
				return true
			}
		}
		return false
	}
	if !eventually.Within(10*time.Second, stoppedNow) {
		t.Fatalf("the container runs: no process of it is stopped (count %q), the STOP recorded before it started was not applied", read())
	}
	stopped := read()
	f.update(7, func(j *api.AssignedJob) {
		j.Signals = append(j.Signals, api.SignalRequest{Seq: 2, Signal: int(syscall.SIGCONT)})
	})
	if !eventually.Within(10*time.Second, func() bool { return read() != stopped }) {
		t.Fatalf("CONT did not resume the container: count still %q", stopped)
	}
}
