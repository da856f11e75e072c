package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/eventually"
)

// TestStartChildOutlivesCallerThread: a dev nodelet's parent-death
// signal is tied to the thread that created it. startChild creates it
// from a thread that lives as long as schedd, so the child is not killed
// when the thread of the goroutine that asked ends (as a thread does when
// a goroutine locked to it returns).
func TestStartChildOutlivesCallerThread(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("SKIP: needs sleep(1)")
	}
	cmd := exec.Command(sleep, "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	type started struct {
		tid  int
		err  error
		main bool
	}
	res := make(chan started)
	var r started
	for {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			// The process's main thread is parked, not ended, when a
			// goroutine locked to it returns: that one starts nothing, and
			// the next goroutine runs elsewhere.
			if tid := unix.Gettid(); tid == unix.Getpid() {
				res <- started{tid: tid, main: true}
				return
			}
			res <- started{unix.Gettid(), startChild(cmd), false}
		}()
		if r = <-res; !r.main {
			break
		}
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()
	task := "/proc/self/task/" + strconv.Itoa(r.tid)
	eventually.True(t, 10*time.Second, fmt.Sprintf("the caller's thread %d ending", r.tid), func() bool {
		_, err := os.Stat(task)
		return os.IsNotExist(err)
	})
	// The thread is gone; a signal tied to it is on its way within
	// moments.
	select {
	case <-exited:
		t.Fatalf("the child died with the thread that asked for it: %v", cmd.ProcessState)
	case <-time.After(500 * time.Millisecond):
	}
}
