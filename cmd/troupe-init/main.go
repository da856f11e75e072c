// Command troupe-init is the first process of every troupe container. It is
// built static (CGO_ENABLED=0) and mounted read-only at
// /.troupe/bin/troupe-init.
//
//	troupe-init [OPTIONS] wait            block until SIGTERM or SIGINT, then exit 0
//	troupe-init [OPTIONS] run -- CMD ...  run CMD in its own process group, forward
//	                                      signals to that group, exit with CMD's status
//
// Options: --sshd PATH serves SSH with `PATH server` (troupe-ssh's SSH
// server) on demand: troupe-init listens on the sessions' SSH port
// (--sshd-port, default 2200) before the command starts, and starts the
// server, in its own process group, on the first connection, handing it
// the listening socket and that connection (socket activation). A
// session whose containers nobody reaches over SSH runs no server, and
// a connection that comes early waits in the listener's backlog instead
// of being refused. The server is stopped on the way out;
// --exit-fd N writes the exit status (decimal, newline) to inherited
// descriptor N, a file the nodelet made in a directory of its own that
// the container cannot see, so that a nodelet that was not the
// container's parent (it restarted meanwhile) learns how it ended. In
// both modes it reaps every zombie it inherits, as pid 1 must.
//
// --tty-fd N (run mode) gives the command a pseudo-terminal, served to
// `bsub -I` and `battach` clients on the unix socket inherited as
// descriptor N (bound by the nodelet, see attach.Bind; troupe-init only
// listens): the command starts once a first client attached (or after
// ttyStartAfter without one), its output also goes to stdout (the
// transcript), and clients that attach later see the recent output.
//
// troupe-init never opens a path for the nodelet: both descriptors are
// closed on exec, so the command does not inherit them, and it makes
// itself non-dumpable (PR_SET_DUMPABLE 0) so that the command's
// processes, which run as the same user, can neither ptrace it nor
// reach its descriptors through /proc.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/attach"
)

// ttyStartAfter is how long a --tty command waits for its first client
// before it starts anyway (battach can still come later).
var ttyStartAfter = 10 * time.Minute

// forwarded are the signals "run" passes on to the command's group.
var forwarded = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGWINCH,
}

func main() {
	os.Exit(realMain(os.Args[1:]))
}

// sshPort is where sessions' SSH servers listen: troupe-ssh's
// DefaultPort, the nodelet's session.SSHPort (Backend.AI's too).
const sshPort = 2200

func realMain(args []string) int {
	sshd, exitFD, ttyFD, port := "", -1, -1, sshPort
	for len(args) > 1 && (args[0] == "--sshd" || args[0] == "--sshd-port" || args[0] == "--exit-fd" || args[0] == "--tty-fd") {
		switch args[0] {
		case "--sshd":
			sshd = args[1]
			args = args[2:]
			continue
		case "--sshd-port":
			p, err := strconv.Atoi(args[1])
			if err != nil || p < 1 || p > 65535 {
				fmt.Fprintf(os.Stderr, "troupe-init: --sshd-port %q: want a TCP port\n", args[1])
				return 2
			}
			port = p
			args = args[2:]
			continue
		}
		fd, err := strconv.Atoi(args[1])
		if err != nil || fd < 3 {
			fmt.Fprintf(os.Stderr, "troupe-init: %s %q: want a descriptor number of 3 or more\n", args[0], args[1])
			return 2
		}
		if args[0] == "--exit-fd" {
			exitFD = fd
		} else {
			ttyFD = fd
		}
		args = args[2:]
	}
	if len(args) == 0 {
		return usage()
	}
	// The nodelet's descriptors are closed on exec before anything is
	// started (the SSH server on demand included), whatever the mode.
	for _, fd := range []int{exitFD, ttyFD} {
		if fd >= 0 {
			unix.CloseOnExec(fd)
		}
	}
	// Same-uid processes of the container may not ptrace troupe-init or
	// open its descriptors through /proc/1/fd.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	var exit *os.File
	if exitFD >= 0 {
		exit = os.NewFile(uintptr(exitFD), "exit")
	}
	code := realRun(sshd, port, ttyFD, args)
	if exit != nil {
		writeExit(exit, code)
	}
	return code
}

// writeExit records code in the exit file the nodelet handed over, at
// its start (a few bytes: one write).
func writeExit(f *os.File, code int) {
	if _, err := f.WriteAt([]byte(strconv.Itoa(code)+"\n"), 0); err != nil {
		fmt.Fprintf(os.Stderr, "troupe-init: exit file: %v\n", err)
	}
	_ = f.Close()
}

func realRun(sshd string, port, ttyFD int, args []string) int {
	if sshd != "" {
		if _, err := os.Stat(sshd); err != nil {
			fmt.Fprintf(os.Stderr, "troupe-init: sshd: %v\n", err)
			return 127
		}
		// Without the port (something else holds it) the command runs
		// without SSH, as it did when the server itself failed to
		// listen.
		if stop, err := sshdOnDemand(sshd, port); err != nil {
			fmt.Fprintf(os.Stderr, "troupe-init: sshd: %v\n", err)
		} else {
			defer stop()
		}
	}
	switch args[0] {
	case "wait":
		return waitForever()
	case "run":
		rest := args[1:]
		if len(rest) > 0 && rest[0] == "--" {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return usage()
		}
		if ttyFD >= 0 {
			return runTTY(rest, ttyFD)
		}
		return run(rest)
	}
	return usage()
}

func usage() int {
	fmt.Fprintln(os.Stderr, "usage: troupe-init [--sshd PATH [--sshd-port N]] [--exit-fd N] wait | troupe-init [--sshd PATH [--sshd-port N]] [--exit-fd N] [--tty-fd N] run -- COMMAND [ARG...]")
	return 2
}

// startDaemon starts path args... in its own process group with stdin
// from /dev/null; stop sends its group SIGTERM.
func startDaemon(path string, extra []*os.File, args ...string) (stop func(), err error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	p, err := os.StartProcess(path, append([]string{path}, args...), &os.ProcAttr{
		Files: append([]*os.File{null, os.Stdout, os.Stderr}, extra...),
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = syscall.Kill(-p.Pid, syscall.SIGTERM) }, nil
}

// sshdOnDemand listens on port and starts `path server` on the first
// connection, handing it the listening socket (descriptor 3) and that
// connection (4); from then on the server accepts. stop closes the
// listener and ends the server if it started.
func sshdOnDemand(path string, port int) (stop func(), err error) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{Port: port})
	if err != nil {
		return nil, err
	}
	var (
		mu      sync.Mutex
		stopped bool
		kill    func()
	)
	go func() {
		defer ln.Close() // the server holds its own from now on
		conn, err := ln.AcceptTCP()
		if err != nil {
			return // stopped
		}
		defer conn.Close()
		lf, err := ln.File()
		if err != nil {
			fmt.Fprintf(os.Stderr, "troupe-init: sshd: %v\n", err)
			return
		}
		defer lf.Close()
		cf, err := conn.File()
		if err != nil {
			fmt.Fprintf(os.Stderr, "troupe-init: sshd: %v\n", err)
			return
		}
		defer cf.Close()
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if kill, err = startDaemon(path, []*os.File{lf, cf}, "server", "--listen-fd", "3", "--conn-fd", "4"); err != nil {
			fmt.Fprintf(os.Stderr, "troupe-init: sshd: %v\n", err)
		}
	}()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		_ = ln.Close()
		if kill != nil {
			kill()
		}
	}, nil
}

// waitForever blocks until SIGTERM or SIGINT, reaping children meanwhile.
func waitForever() int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap(-1)
			continue
		}
		return 0
	}
	return 0
}

// run starts args in a new process group and supervises it.
func run(args []string) int {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD}, forwarded...)...)
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "troupe-init: %v\n", err)
		return 127
	}
	proc, err := os.StartProcess(path, args, &os.ProcAttr{
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return startFailed(err)
	}
	return supervise(sigs, proc.Pid)
}

// startFailed reports a command that could not start and returns the
// status a shell gives it: 126 not executable, 127 otherwise.
func startFailed(err error) int {
	fmt.Fprintf(os.Stderr, "troupe-init: %v\n", err)
	if errors.Is(err, os.ErrPermission) {
		return 126
	}
	return 127
}

// supervise forwards the signals arriving on sigs to the process group
// pid leads until pid exits, and returns its exit status.
func supervise(sigs <-chan os.Signal, pid int) int {
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			_ = syscall.Kill(-pid, sig.(syscall.Signal))
			continue
		}
		if code, done := reap(pid); done {
			return code
		}
	}
	return 0
}

// runTTY runs args on a pseudo-terminal served to attach clients on the
// bound socket inherited as descriptor fd, and supervises it as run does.
func runTTY(args []string, fd int) int {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD}, forwarded...)...)
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "troupe-init: %v\n", err)
		return 127
	}
	ln, err := attach.ListenFD(fd)
	if err != nil {
		fmt.Fprintf(os.Stderr, "troupe-init: %v\n", err)
		return 127
	}
	defer ln.Close()
	master, slave, err := pty.Open()
	if err != nil {
		fmt.Fprintf(os.Stderr, "troupe-init: pseudo-terminal: %v\n", err)
		return 127
	}
	defer master.Close()
	srv := attach.NewServer(master, os.Stdout)
	go func() { _ = srv.Serve(ln) }()
	pumped := make(chan struct{})
	go func() { srv.Pump(); close(pumped) }()

	// Start once someone watches: nothing typed or printed is lost.
	start := time.NewTimer(ttyStartAfter)
	defer start.Stop()
wait:
	for {
		select {
		case <-srv.Attached():
			break wait
		case <-start.C:
			break wait
		case sig := <-sigs:
			if sig != syscall.SIGCHLD {
				slave.Close()
				return 128 + int(sig.(syscall.Signal))
			}
			reap(-1)
		}
	}
	proc, err := os.StartProcess(path, args, &os.ProcAttr{
		Files: []*os.File{slave, slave, slave},
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0},
	})
	slave.Close()
	if err != nil {
		code := startFailed(err)
		srv.Finish(code)
		return code
	}
	code := supervise(sigs, proc.Pid)
	// The last output is in flight until the terminal's other side is
	// closed by every process that held it.
	select {
	case <-pumped:
	case <-time.After(time.Second):
	}
	srv.Finish(code)
	return code
}

// reap collects every exited child. When main (> 0) is among them it
// returns main's exit status, shell style, and true.
func reap(main int) (int, bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return 0, false
		}
		if pid != main {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal()), true
		}
		return ws.ExitStatus(), true
	}
}
