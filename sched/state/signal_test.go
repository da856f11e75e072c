package state

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

func TestSignalRunningJob(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(2)}}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1", "n1"}}}}}})

	// Not running yet: USR1 is refused, and nothing is recorded.
	_, err := h.st.Apply(100, Command{Act: SignalJob{Signal: &Signal{JobID: 1, Signal: int(syscall.SIGUSR1)}}})
	if !errors.Is(err, ErrConflict) || err.Error() != "job 1 is SCHEDULED: only a running job's containers can get SIGUSR1; KILL, TERM or INT cancels it" {
		t.Fatalf("USR1 to a scheduled job: %v", err)
	}
	h.report("n1", 1, "main1", api.ContainerRunning, 0)
	h.report("n1", 1, "sub1", api.ContainerRunning, 0)
	if h.job(1).State != api.JobRunning {
		t.Fatalf("state %s", h.job(1).State)
	}

	j := h.apply(Command{Act: SignalJob{Signal: &Signal{JobID: 1, Signal: int(syscall.SIGUSR1)}}}).(*Job)
	j2 := h.apply(Command{Act: SignalJob{Signal: &Signal{JobID: 1, Signal: int(syscall.SIGTERM), Host: "sub1"}}}).(*Job)
	got := h.job(1)
	if got.State != api.JobRunning || got.KillWanted || got.Cancelled {
		t.Fatalf("a signal must not cancel: %s kill %v cancelled %v", got.State, got.KillWanted, got.Cancelled)
	}
	if len(j.Signals) != 1 || len(j2.Signals) != 2 || len(got.Signals) != 2 {
		t.Fatalf("signals: %+v / %+v", j.Signals, got.Signals)
	}
	want := []SignalRequest{
		{Seq: 1, Signal: int(syscall.SIGUSR1), Time: t0.Add(6 * time.Second)},
		{Seq: 2, Signal: int(syscall.SIGTERM), Host: "sub1", Time: t0.Add(7 * time.Second)},
	}
	for i, s := range got.Signals {
		if s != want[i] {
			t.Errorf("signal %d: %+v, want %+v", i, s, want[i])
		}
	}
	if got.ModifyIndex != h.idx {
		t.Errorf("modify index %d, want %d", got.ModifyIndex, h.idx)
	}

	_, err = h.st.Apply(101, Command{Act: SignalJob{Signal: &Signal{JobID: 1, Signal: 10, Host: "sub9"}}})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "job 1 has no container sub9; its hosts: main1, sub1") {
		t.Errorf("unknown host: %v", err)
	}
	for _, bad := range []*Signal{nil, {JobID: 1, Signal: 0}, {JobID: 1, Signal: 65}} {
		if _, err := h.st.Apply(102, Command{Act: SignalJob{Signal: bad}}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if _, err := h.st.Apply(103, Command{Act: SignalJob{Signal: &Signal{JobID: 9, Signal: 10}}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}

	// The job ends as its exit says: killed by the signal, FAILED 138.
	h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{
		{JobID: 1, Host: "main1", State: api.ContainerExited, ExitCode: 138, CPUTime: 1500 * time.Millisecond, MemPeak: 100 << 20},
	}}}}})
	h.apply(Command{Act: Reports{Reports: []Report{Report{Node: "n1", Updates: []ContainerUpdate{
		{JobID: 1, Host: "sub1", State: api.ContainerKilled, ExitCode: 143, CPUTime: 500 * time.Millisecond, MemPeak: 20 << 20},
	}}}}})
	got = h.job(1)
	if got.State != api.JobFailed || got.ExitCode != 138 {
		t.Fatalf("ended %s exit %d", got.State, got.ExitCode)
	}
	if got.CPUTime != 2*time.Second || got.MemPeak != 120<<20 || got.Containers[0].CPUTime != 1500*time.Millisecond || got.Containers[1].MemPeak != 20<<20 {
		t.Errorf("usage: job %v %d, containers %+v", got.CPUTime, got.MemPeak, got.Containers)
	}
	if _, err := h.st.Apply(104, Command{Act: SignalJob{Signal: &Signal{JobID: 1, Signal: 10}}}); !errors.Is(err, ErrEnded) {
		t.Errorf("ended job: %v", err)
	}
}

func TestSignalCancelsWaitingJob(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT} {
		h := newHarness(t)
		h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
		j := h.apply(Command{Act: SignalJob{Signal: &Signal{JobID: 1, Signal: int(sig)}}}).(*Job)
		if j.State != api.JobCancelled || h.job(1).State != api.JobCancelled || len(j.Signals) != 0 {
			t.Errorf("%v to a pending job: %s, signals %v", sig, h.job(1).State, j.Signals)
		}
	}
	h := newHarness(t)
	held := session(1)
	held.State = api.JobHeld
	h.apply(Command{Act: Submit{Jobs: []*Job{held}}})
	_, err := h.st.Apply(100, Command{Act: SignalJob{Signal: &Signal{JobID: 1, Signal: int(syscall.SIGHUP)}}})
	if !errors.Is(err, ErrConflict) || err.Error() != "job 1 is HELD: only a running job's containers can get SIGHUP; KILL, TERM or INT cancels it" {
		t.Errorf("HUP to a held job: %v", err)
	}
	if h.job(1).State != api.JobHeld {
		t.Errorf("held job became %s", h.job(1).State)
	}
}

// TestStopBeforeStart: a placed job that has not started (SCHEDULED,
// PREPARING: bjobs's RUN) takes STOP and CONT, recorded for its
// containers to start stopped or not; any other signal is still refused.
func TestStopBeforeStart(t *testing.T) {
	h := newHarness(t)
	h.apply(Command{Act: Submit{Jobs: []*Job{session(1)}}})
	h.apply(Command{Act: Place{Plan: &Plan{Placements: []Placement{{JobID: 1, Nodes: []string{"n1"}}}}}})
	if s := h.job(1).State; s != api.JobScheduled {
		t.Fatalf("state %s, want SCHEDULED", s)
	}
	j := h.apply(Command{Act: SignalJob{Signal: &Signal{JobID: 1, Signal: int(syscall.SIGSTOP)}}}).(*Job)
	if j.State != api.JobScheduled || len(j.Signals) != 1 || j.Signals[0].Signal != int(syscall.SIGSTOP) {
		t.Fatalf("STOP to a scheduled job: %s, signals %+v", j.State, j.Signals)
	}
	h.report("n1", 1, "main1", api.ContainerPreparing, 0)
	if s := h.job(1).State; s != api.JobPreparing {
		t.Fatalf("state %s, want PREPARING", s)
	}
	j = h.apply(Command{Act: SignalJob{Signal: &Signal{JobID: 1, Signal: int(syscall.SIGCONT), Host: "main1"}}}).(*Job)
	if len(j.Signals) != 2 || j.Signals[1].Signal != int(syscall.SIGCONT) || j.Signals[1].Host != "main1" {
		t.Fatalf("CONT to a preparing job: signals %+v", j.Signals)
	}
	_, err := h.st.Apply(100, Command{Act: SignalJob{Signal: &Signal{JobID: 1, Signal: int(syscall.SIGUSR1)}}})
	if !errors.Is(err, ErrConflict) || len(h.job(1).Signals) != 2 {
		t.Errorf("USR1 to a preparing job: %v, signals %+v", err, h.job(1).Signals)
	}
}
