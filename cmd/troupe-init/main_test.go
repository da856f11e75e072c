package main

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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
