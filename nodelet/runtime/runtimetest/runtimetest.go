// Package runtimetest is the behaviour suite every nodelet runtime must
// pass: a driver's test calls Run with its Runtime. It needs /bin/sh and
// sleep on the host (ImageHost), and the go tool to build troupe-init.
//
// A test helper: no binary may import it (cmd/layout_test.go checks). It
// must not import a driver: each driver's test imports it.
package runtimetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	rt "github.com/troupe-hpc/troupe/nodelet/runtime"
)

// MarkEnv is set in every container the suite starts; FindProcs finds
// the processes that carry it.
const MarkEnv = "TROUPE_TEST_MARK"

// DefaultPath is the PATH the suite's containers get.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// BuildInit builds cmd/troupe-init (static) into a temporary directory
// and returns its path.
func BuildInit(t testing.TB) string {
	t.Helper()
	return BuildCmd(t, "troupe-init")
}

// BuildCmd builds cmd/name (static) into a temporary directory and
// returns its path.
func BuildCmd(t testing.TB, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", out, "github.com/troupe-hpc/troupe/cmd/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, b)
	}
	return out
}

// NewSpec returns a Spec for a host-image container running args as the
// current user, with a fresh ID, Dir and marker. Its stdout and stderr
// go to the returned files' paths (read them with ReadFile).
func NewSpec(t testing.TB, init string, args ...string) (rt.Spec, string) {
	t.Helper()
	id := "rtt-" + randHex(6)
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	return rt.Spec{
		ID:       id,
		Hostname: "main1",
		Image:    rt.ImageHost,
		Args:     args,
		Env:      []string{"PATH=" + DefaultPath, MarkEnv + "=" + id},
		UID:      os.Getuid(),
		GID:      os.Getgid(),
		Stdout:   out,
		Stderr:   out,
		Dir:      filepath.Join(dir, "c"),
		Init:     init,
	}, out.Name()
}

// FindProcs returns the pids of live processes whose environment holds
// MarkEnv=mark.
func FindProcs(mark string) []int {
	want := []byte(MarkEnv + "=" + mark + "\x00")
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid := 0
		for _, ch := range e.Name() {
			if ch < '0' || ch > '9' {
				pid = -1
				break
			}
			pid = pid*10 + int(ch-'0')
		}
		if pid <= 0 || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ReadFile returns the file's content, trimmed.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Start starts spec and registers a Destroy at cleanup.
func Start(t testing.TB, r rt.Runtime, spec rt.Spec) rt.Container {
	t.Helper()
	c, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("start %s: %v", spec.ID, err)
	}
	t.Cleanup(func() { _ = c.Destroy(context.Background()) })
	return c
}

// WaitExit waits at most d for c to exit.
func WaitExit(t testing.TB, c rt.Container, d time.Duration) rt.Exit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	e, err := c.Wait(ctx)
	if err != nil {
		t.Fatalf("wait %s: %v", c.ID(), err)
	}
	return e
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// skipUnlessLinux guards the suite: it relies on /proc.
func skipUnlessLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SKIP: runtime suite needs Linux /proc; running on " + runtime.GOOS)
	}
}
