package main

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
		tid int
		err error
	}
	// The test holds its own thread, the process's main thread among
	// them, which a locked goroutine's return parks rather than ends.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	res := make(chan started)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		res <- started{unix.Gettid(), startChild(cmd)}
	}()
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()
	task := "/proc/self/task/" + strconv.Itoa(r.tid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(task); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the caller's thread %d did not end in 10s", r.tid)
		}
	}
	// The thread is gone; a signal tied to it is on its way within
	// moments.
	select {
	case <-exited:
		t.Fatalf("the child died with the thread that asked for it: %v", cmd.ProcessState)
	case <-time.After(500 * time.Millisecond):
	}
}
