package procfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/eventually"
)

// A command name holding spaces and parentheses is skipped whole; every
// field troupe uses lands where proc(5) numbers it.
func TestParse(t *testing.T) {
	line := "4242 (a) b (c) R 1 4243 4244 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 12345 987654 321 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	s, err := Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 4242, State: 'R', PPID: 1, PGRP: 4243, UTime: 250, STime: 50, StartTime: 12345, VSize: 987654, RSS: 321}
	if s != want {
		t.Errorf("parsed %+v, want %+v", s, want)
	}
	for _, bad := range []string{"", "4242 (x) R 1 2", "4242 x R 1", "x (a) R " + strings.Repeat("1 ", 30), "1 (a) RR " + strings.Repeat("1 ", 30)} {
		if _, err := Parse([]byte(bad)); !errors.Is(err, ErrStat) {
			t.Errorf("Parse(%q): %v, want ErrStat", bad, err)
		}
	}
	if (Stat{State: 'Z'}).Live() || (Stat{State: 'X'}).Live() || !(Stat{State: 'S'}).Live() {
		t.Error("Live is wrong")
	}
}

// The calling process reads itself, by pid and as /proc/self; a process
// that is not there is os.ErrNotExist.
func TestReadSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("SKIP: no /proc here: %v", err)
	}
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	byPID, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.PID != os.Getpid() || self.PPID != os.Getppid() || self.StartTime != byPID.StartTime || self.VSize == 0 {
		t.Errorf("Self() = %+v, Read(%d) = %+v", self, os.Getpid(), byPID)
	}
	if _, err := Read(1 << 30); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read of no process: %v, want os.ErrNotExist", err)
	}
}

// A shell with two children in a process group of its own: both are its
// live descendants, the subtree of one can be left out, and the group is
// alive until all are gone.
func TestDescendantsAndGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("SKIP: no /proc here: %v", err)
	}
	cmd := exec.Command("sh", "-c", "sleep 300 & sleep 300 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() { _ = syscall.Kill(-pid, syscall.SIGKILL); _ = cmd.Wait() }()
	kids := eventually.Value(t, 5*time.Second, fmt.Sprintf("shell %d's 2 descendants", pid), func() ([]int, bool) {
		kids := Descendants(pid, 0)
		return kids, len(kids) == 2
	})
	if got := Descendants(pid, kids[0]); !slices.Equal(got, kids[1:]) {
		t.Errorf("Descendants skipping %d = %v, want %v", kids[0], got, kids[1:])
	}
	if !slices.Contains(Descendants(os.Getpid(), 0), kids[1]) {
		t.Errorf("grandchild %d is not a descendant of the test", kids[1])
	}
	if !GroupAlive(pid) {
		t.Fatalf("group %d not alive", pid)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The sleeps, orphaned, are reaped by init: the group stays alive
	// only while one of them is not.
	eventually.True(t, 5*time.Second, fmt.Sprintf("group %d gone after SIGKILL", pid), func() bool { return !GroupAlive(pid) })
}
