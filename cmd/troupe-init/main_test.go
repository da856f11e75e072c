package main

import (
	"debug/elf"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/attach"
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
			time.Sleep(300 * time.Millisecond) // let it install handlers
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
		f := filepath.Join(t.TempDir(), "exit")
		_ = exec.Command(bin, append([]string{"--exit-file", f}, tc.args...)...).Run()
		b, err := os.ReadFile(f)
		if err != nil || string(b) != tc.want {
			t.Errorf("%v: exit file = %q (%v), want %q", tc.args, b, err, tc.want)
		}
	}
}

// dialAttach waits for troupe-init's attach socket in dir and connects.
func dialAttach(t *testing.T, dir string) net.Conn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", filepath.Join(dir, attach.SocketName))
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("attach socket: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTTY(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	var transcript strings.Builder
	cmd := exec.Command(bin, "--tty", dir, "run", "--", "sh", "-c",
		`test -t 0 && echo on-a-tty; read x; echo "got:$x"; stty size; exit 5`)
	cmd.Stdout = &transcript
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// The command waits for a client: it starts with the client's size.
	c := dialAttach(t, dir)
	in, inw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = inw.WriteString("hello\n")
	}()
	var out strings.Builder
	code, err := attach.Run(c, in, &out)
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
	if _, err := os.Stat(filepath.Join(dir, attach.SocketName)); !os.IsNotExist(err) {
		t.Errorf("attach socket left behind (%v)", err)
	}
}

// TestTTYWindowAndLateClient: a resize reaches the terminal, input from a
// second client reaches the same terminal, and both see its output.
func TestTTYWindowAndLateClient(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "--tty", dir, "run", "--", "sh", "-c", `echo ready; read x; stty size; echo "x=$x"; exit 0`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	a := dialAttach(t, dir)
	defer a.Close()
	if err := attach.WriteWindow(a, 40, 120); err != nil {
		t.Fatal(err)
	}
	ra := attach.NewReader(a)
	readUntil(t, a, ra, "ready")
	b := dialAttach(t, dir) // sees the replay of "ready", then types
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
