package main

import (
	"bufio"
	"debug/elf"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/freeport"
	"github.com/troupe-hpc/troupe/internal/procfs"
)

func build(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "troupe-init")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	return out
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestStatic(t *testing.T) {
	f, err := elf.Open(build(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("troupe-init is dynamically linked (has PT_INTERP)")
		}
	}
}

func TestRunPropagatesExit(t *testing.T) {
	bin := build(t)
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"Exit3", []string{"run", "--", "sh", "-c", "exit 3"}, 3},
		{"KilledBySignal", []string{"run", "--", "sh", "-c", "kill -TERM $$"}, 128 + 15},
		{"NotFound", []string{"run", "--", "no-such-command-xyz"}, 127},
		{"Usage", []string{"frobnicate"}, 2},
		{"RunWithoutCommand", []string{"run", "--"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(exec.Command(bin, tc.args...).Run()); got != tc.want {
				t.Errorf("exit = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSignalsEndWaitAndRun(t *testing.T) {
	bin := build(t)
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"WaitSIGTERM", []string{"wait"}, 0},
		{"RunForwardsSIGTERM", []string{"run", "--", "sleep", "60"}, 128 + 15},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			if tc.args[0] == "run" {
				// run takes its signals before it starts the command: a
				// child means the handler is in.
				eventually.True(t, 10*time.Second, "troupe-init starting its command", func() bool { return len(procfs.Descendants(cmd.Process.Pid, 0)) > 0 })
			} else {
				// wait shows no sign once its handler is in (the Go
				// runtime catches SIGTERM from the start either way):
				// time for it is all a test can give.
				time.Sleep(300 * time.Millisecond)
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-done:
				if got := exitCode(err); got != tc.want {
					t.Errorf("exit = %d, want %d", got, tc.want)
				}
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("did not stop on SIGTERM")
			}
		})
	}
}

func TestExitFile(t *testing.T) {
	bin := build(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--", "sh", "-c", "exit 7"}, "7\n"},
		{[]string{"run", "--", "sh", "-c", "kill -TERM $$"}, "143\n"},
	} {
		path := filepath.Join(t.TempDir(), "exit")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, append([]string{"--exit-fd", "3"}, tc.args...)...)
		cmd.ExtraFiles = []*os.File{f}
		_ = cmd.Run()
		f.Close()
		b, err := os.ReadFile(path)
		if err != nil || string(b) != tc.want {
			t.Errorf("%v: exit file = %q (%v), want %q", tc.args, b, err, tc.want)
		}
	}
}

// TestDescriptorsPrivate: the command inherits neither the exit file nor
// the attach socket, and, running as the same user as troupe-init, it
// cannot read troupe-init's descriptors through /proc (not dumpable).
func TestDescriptorsPrivate(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	exit, err := os.Create(filepath.Join(dir, "exit"))
	if err != nil {
		t.Fatal(err)
	}
	defer exit.Close()
	sock, err := attach.Bind(filepath.Join(dir, attach.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	out := filepath.Join(dir, "out")
	script := `ls -l /proc/self/fd/ > ` + out + `; if ls /proc/$PPID/fd >/dev/null 2>&1; then echo parent-fds-readable; else echo parent-fds-denied; fi >> ` + out
	cmd := exec.Command(bin, "--exit-fd", "3", "--tty-fd", "4", "run", "--", "sh", "-c", script)
	cmd.ExtraFiles = []*os.File{exit, sock}
	if os.Geteuid() == 0 {
		for _, d := range []string{dir, filepath.Dir(dir), filepath.Dir(bin), filepath.Dir(filepath.Dir(bin))} {
			if err := os.Chmod(d, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := dialAttach(t, filepath.Join(dir, attach.SocketName), cmd.Process.Pid)
	var term strings.Builder
	_, _ = attach.Run(c, strings.NewReader(""), &term)
	_ = cmd.Wait()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the command's report: %v (terminal %q)", err, term.String())
	}
	// Descriptors this test's own environment passed down may show;
	// troupe-init's two must not.
	if got := string(b); strings.Contains(got, "socket:") || strings.Contains(got, filepath.Join(dir, "exit")) ||
		!strings.Contains(got, "parent-fds-denied") {
		t.Errorf("the command inherited troupe-init's descriptors or could read them:\n%s", got)
	}
}

// dialAttach waits for troupe-init (pid) to listen on the socket at path
// and connects.
func dialAttach(t *testing.T, path string, pid int) net.Conn {
	t.Helper()
	var c net.Conn
	eventually.NoError(t, 10*time.Second, "troupe-init listening on the attach socket", func() (err error) {
		c, err = attach.DialPeer(path, pid)
		return err
	})
	return c
}

// startTTY starts troupe-init --tty-fd on a socket bound in a fresh
// directory, as the nodelet does, and returns it with the socket's path.
func startTTY(t *testing.T, bin string, stdout *strings.Builder, args ...string) (*exec.Cmd, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), attach.SocketName)
	sock, err := attach.Bind(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	cmd := exec.Command(bin, append([]string{"--tty-fd", "3", "run", "--"}, args...)...)
	cmd.ExtraFiles = []*os.File{sock}
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, path
}

// watchedOutput is a terminal's output that tells (closes seen) once it
// shows want.
type watchedOutput struct {
	strings.Builder
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watchedOutput) Write(p []byte) (int, error) {
	n, err := w.Builder.Write(p)
	if strings.Contains(w.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func TestTTY(t *testing.T) {
	bin := build(t)
	var transcript strings.Builder
	cmd, sock := startTTY(t, bin, &transcript, "sh", "-c",
		`test -t 0 && echo on-a-tty; read x; echo "got:$x"; stty size; exit 5`)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// The command waits for a client: it starts with the client's size.
	c := dialAttach(t, sock, cmd.Process.Pid)
	in, inw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// The line is typed once the command shows it runs, as a user would.
	out := &watchedOutput{want: "on-a-tty", seen: make(chan struct{})}
	go func() {
		select {
		case <-out.seen:
			_, _ = inw.WriteString("hello\n")
		case <-time.After(10 * time.Second):
			inw.Close()
		}
	}()
	code, err := attach.Run(c, in, out)
	if err != nil || code != 5 {
		t.Fatalf("attach.Run = %d, %v; output %q", code, err, out.String())
	}
	for _, want := range []string{"on-a-tty", "got:hello", "24 80"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("terminal output %q lacks %q", out.String(), want)
		}
	}
	select {
	case err := <-done:
		if got := exitCode(err); got != 5 {
			t.Errorf("troupe-init exit = %d, want 5", got)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("troupe-init did not exit with its command")
	}
	if !strings.Contains(transcript.String(), "got:hello") {
		t.Errorf("transcript %q lacks the terminal's output", transcript.String())
	}
}

// TestTTYWindowAndLateClient: a resize reaches the terminal, input from a
// second client reaches the same terminal, and both see its output.
func TestTTYWindowAndLateClient(t *testing.T) {
	bin := build(t)
	cmd, sock := startTTY(t, bin, nil, "sh", "-c", `echo ready; read x; stty size; echo "x=$x"; exit 0`)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	a := dialAttach(t, sock, cmd.Process.Pid)
	defer a.Close()
	if err := attach.WriteWindow(a, 40, 120); err != nil {
		t.Fatal(err)
	}
	ra := attach.NewReader(a)
	readUntil(t, a, ra, "ready")
	b := dialAttach(t, sock, cmd.Process.Pid) // sees the replay of "ready", then types
	defer b.Close()
	rb := attach.NewReader(b)
	readUntil(t, b, rb, "ready")
	if err := attach.WriteData(b, []byte("from-b\n")); err != nil {
		t.Fatal(err)
	}
	out := readUntil(t, a, ra, "x=from-b")
	if !strings.Contains(out, "40 120") {
		t.Errorf("stty size after resize: %q, want 40 120", out)
	}
	readUntil(t, b, rb, "x=from-b")
}

// readUntil reads data frames from c until their text contains want,
// for up to 10 s; it fails on an exit or error frame first.
func readUntil(t *testing.T, c net.Conn, r *attach.Reader, want string) string {
	t.Helper()
	var got strings.Builder
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	for !strings.Contains(got.String(), want) {
		f, err := r.Next()
		if err != nil {
			t.Fatalf("waiting for %q: %v (got %q)", want, err, got.String())
		}
		if f.Type != attach.Data {
			t.Fatalf("waiting for %q: frame %q (got %q)", want, f.Type, got.String())
		}
		got.Write(f.Payload)
	}
	return got.String()
}

// TestSSHDOnDemand: with --sshd, troupe-init listens on the SSH port
// before the command runs but starts no server until a client connects;
// the first connection starts `PATH server --listen-fd 3 --conn-fd 4`
// with the listening socket and that very connection, which the server
// then serves; the server is stopped when troupe-init ends.
func TestSSHDOnDemand(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	mark := filepath.Join(dir, "started")
	fake := filepath.Join(dir, "fake-sshd")
	// The stand-in server records its arguments and descriptors, answers
	// on the connection it was handed, and stays (as a server would).
	script := "#!/bin/sh\n" +
		"{ echo \"$@\"; readlink /proc/$$/fd/3 /proc/$$/fd/4; } > " + mark + ".tmp && mv " + mark + ".tmp " + mark + "\n" +
		"echo served >&4\n" +
		"exec sleep 60\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(freeport.Addr(t))
	port, _ := strconv.Atoi(p)

	out := filepath.Join(dir, "out")
	stdout, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	cmd := exec.Command(bin, "--sshd", fake, "--sshd-port", strconv.Itoa(port), "run", "--", "sh", "-c", "echo up; exec sleep 60")
	cmd.Stdout, cmd.Stderr = stdout, stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	eventually.True(t, 10*time.Second, "the command printing up", func() bool { b, _ := os.ReadFile(out); return strings.Contains(string(b), "up") })
	time.Sleep(200 * time.Millisecond) // a server started at once would have written its mark by now
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the SSH server started before any client connected")
	}

	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		t.Fatalf("the SSH port is not listened on while the command runs: %v", err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || got != "served\n" {
		t.Fatalf("the first connection was not handed to the server: read %q, %v", got, err)
	}
	b, err := os.ReadFile(mark)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || lines[0] != "server --listen-fd 3 --conn-fd 4" ||
		!strings.HasPrefix(lines[1], "socket:") || !strings.HasPrefix(lines[2], "socket:") {
		t.Fatalf("the server was started as %q, want `server --listen-fd 3 --conn-fd 4` with two sockets", lines)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	eventually.True(t, 10*time.Second, "the SSH port closed after troupe-init ended", func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}

// TestSSHDInheritsNoNodeletDescriptor: the exit file and the terminal's
// socket are closed on exec from troupe-init's start, so the SSH server
// it starts on demand (and the shells it runs) never holds them, in
// either mode, whatever their numbers.
func TestSSHDInheritsNoNodeletDescriptor(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	mark := filepath.Join(dir, "fds")
	fake := filepath.Join(dir, "fake-sshd")
	script := "#!/bin/sh\nls /proc/$$/fd > " + mark + ".tmp && mv " + mark + ".tmp " + mark + "\nexec sleep 60\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	exit, err := os.Create(filepath.Join(dir, "exit"))
	if err != nil {
		t.Fatal(err)
	}
	defer exit.Close()
	sock, err := attach.Bind(filepath.Join(dir, attach.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	_, p, _ := net.SplitHostPort(freeport.Addr(t))
	// Descriptors 5 and 6: the server's own 3 and 4 (listener and
	// connection) do not replace them in it.
	cmd := exec.Command(bin, "--sshd", fake, "--sshd-port", p, "--exit-fd", "5", "--tty-fd", "6", "wait")
	cmd.ExtraFiles = []*os.File{null, null, exit, sock}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var conn net.Conn
	eventually.True(t, 10*time.Second, "the SSH server answering", func() bool {
		conn, err = net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", p), time.Second)
		return err == nil
	})
	defer conn.Close()
	eventually.True(t, 10*time.Second, "the SSH server's mark", func() bool { _, err := os.Stat(mark); return err == nil })
	b, err := os.ReadFile(mark)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range strings.Fields(string(b)) {
		if fd == "5" || fd == "6" {
			t.Errorf("the SSH server holds descriptor %s of troupe-init's (its descriptors: %q)", fd, strings.Fields(string(b)))
		}
	}
}
