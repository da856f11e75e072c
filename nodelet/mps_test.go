package nodelet

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// fakeMPS puts a stand-in nvidia-cuda-mps-control first on $PATH; each
// invocation appends "ARGS|PIPE|LOG|STDIN" to the returned file.
func fakeMPS(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	rec := filepath.Join(t.TempDir(), "mps.log")
	script := fmt.Sprintf(`#!/bin/sh
in=""
if [ $# -eq 0 ]; then in=$(cat); fi
echo "$*|$CUDA_MPS_PIPE_DIRECTORY|$CUDA_MPS_LOG_DIRECTORY|$in" >> %s
`, rec)
	if err := os.WriteFile(filepath.Join(bin, mpsName), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return rec
}

func readLines(path string) []string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestMPSDaemonRefcount: started with the first fractional container,
// once, with its directories under the state dir; stopped after the last.
func TestMPSDaemonRefcount(t *testing.T) {
	rec := fakeMPS(t)
	dir := t.TempDir()
	d := &mpsDaemon{dir: dir, log: testLog()}
	p1, p2 := d.acquire(), d.acquire()
	if p1 != filepath.Join(dir, "pipe") || p2 != p1 {
		t.Errorf("pipes %q %q, want %q", p1, p2, filepath.Join(dir, "pipe"))
	}
	d.release()
	if got := readLines(rec); len(got) != 1 {
		t.Fatalf("after one release: invocations %q, want only the start", got)
	}
	d.release()
	got := readLines(rec)
	want := []string{
		"-d|" + filepath.Join(dir, "pipe") + "|" + filepath.Join(dir, "log") + "|",
		"|" + filepath.Join(dir, "pipe") + "||quit",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("invocations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMPSDaemonAbsent: no binary, no daemon and no pipe, no error.
func TestMPSDaemonAbsent(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	d := &mpsDaemon{dir: t.TempDir(), log: testLog()}
	if p := d.acquire(); p != "" {
		t.Errorf("pipe %q without the binary", p)
	}
	d.release()
}

// TestAgentRunsMPSForFractionalGPUs: a container holding half a (fake)
// GPU gets the MPS variables, and the daemon runs while it does.
func TestAgentRunsMPSForFractionalGPUs(t *testing.T) {
	rec := fakeMPS(t)
	s := newTestSchedd(t)
	state := t.TempDir()
	startAgentCause(t, s, RuntimeProcess, state, func(c *Config) { c.FakeGPUs = 1 })
	cwd := t.TempDir()
	id := s.submit(t, cwd, func(j *jobspec.Job) { j.Resources.GPU = 0.5 },
		sh(`echo "$CUDA_VISIBLE_DEVICES|$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE|$CUDA_MPS_PIPE_DIRECTORY"; sleep 0.5`))
	s.waitState(t, id, "main1", api.ContainerExited)
	out := runtimetest.ReadFile(t, filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", id)))
	pipe := filepath.Join(state, "mps", "pipe")
	if out != "0|50|"+pipe {
		t.Errorf("container saw %q, want %q", out, "0|50|"+pipe)
	}
	if !eventually.Within(5*time.Second, func() bool { return len(readLines(rec)) == 2 }) {
		t.Fatalf("MPS invocations %q, want start then quit", readLines(rec))
	}
	if got := readLines(rec); !strings.HasPrefix(got[0], "-d|"+pipe) || !strings.HasSuffix(got[1], "|quit") {
		t.Errorf("MPS invocations %q", got)
	}
}

func testLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestAgentGPUOrdinals (issue 14 item 6g): a container holding node GPU 1
// sees CUDA_VISIBLE_DEVICES=0 under runc, which gives it only its own
// device node (CUDA counts from 0 there, as with the NVIDIA container
// toolkit), and 1 under the process runtime, which sees the node's.
func TestAgentGPUOrdinals(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt string) {
		fakeMPS(t)
		s := newTestSchedd(t)
		startAgentCause(t, s, rt, t.TempDir(), func(c *Config) { c.FakeGPUs = 2 })
		cwd := t.TempDir()
		whole := func(j *jobspec.Job) { j.Resources.GPU = 1 }
		first := s.submit(t, cwd, whole, sh(`sleep 30`))
		s.waitState(t, first, "main1", api.ContainerRunning)
		second := s.submit(t, cwd, whole, sh(`echo "$CUDA_VISIBLE_DEVICES|$NVIDIA_VISIBLE_DEVICES"`))
		j := s.waitJob(t, second, func(j api.Job) bool { return j.State.Terminal() })
		if len(j.Containers[0].GPUs) != 1 || j.Containers[0].GPUs[0].Device != 1 {
			t.Fatalf("second job holds %+v, want node GPU 1", j.Containers[0].GPUs)
		}
		want := "1|GPU-fake-0001"
		if rt == RuntimeRunc {
			want = "0|GPU-fake-0001"
		}
		if out := strings.TrimSpace(runtimetest.ReadFile(t, filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", second)))); out != want {
			t.Errorf("container saw %q, want %q", out, want)
		}
	})
}
