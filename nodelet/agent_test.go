package nodelet

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runc"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// runtimes lists the runtimes the agent tests run against here; runc is
// skipped loudly when the machine cannot run it.
func forEachRuntime(t *testing.T, fn func(t *testing.T, rt string)) {
	for _, rt := range []string{RuntimeProcess, RuntimeRunc} {
		t.Run(rt, func(t *testing.T) {
			if rt == RuntimeRunc {
				if os.Geteuid() != 0 {
					t.Skip("SKIP: agent with runc needs root")
				}
				if _, err := runc.Find(""); err != nil {
					t.Skip("SKIP: agent with runc needs the runc binary")
				}
			}
			fn(t, rt)
		})
	}
}

// startAgent runs an agent against f until the test ends; it returns
// the config and a stop function that cancels and waits for Run.
func startAgent(t *testing.T, f *fakeSchedd, rt string) (Config, func()) {
	t.Helper()
	return startAgentIn(t, f, rt, t.TempDir())
}

func startAgentIn(t *testing.T, f *fakeSchedd, rt, stateDir string) (Config, func()) {
	t.Helper()
	cfg := Config{
		Name: "node1", Addr: f.srv.URL, StateDir: stateDir, Runtime: rt,
		CPU: 2, Memory: 1 << 30, InitBinary: runtimetest.BuildInit(t),
		Heartbeat: 50 * time.Millisecond, StopGrace: time.Second,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	go func() { done <- Run(ctx, cfg, log) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
	}
	t.Cleanup(stop)
	return cfg, stop
}

// testJob is a session of size len(cmds): main1 runs cmds[0], subN cmds[N].
func testJob(t *testing.T, id uint64, cmds ...[]string) api.Job {
	j := api.Job{
		ID: id, SessionID: "kid-main1", User: "alice", UID: os.Getuid(), GID: os.Getgid(),
		Cwd: t.TempDir(), State: api.JobScheduled,
		Spec: jobspec.Job{Image: "host", Cluster: jobspec.Cluster{Size: len(cmds), Mode: "single-node"},
			Env: map[string]string{"EPOCHS": "10"}},
	}
	for i, cmd := range cmds {
		c := jobspec.Container{Host: "main1", Role: "main", Idx: 1, Rank: i, Command: cmd,
			Resources: jobspec.Resources{CPU: 0.5, Memory: 64 << 20}}
		if i > 0 {
			c.Host, c.Role, c.Idx = "sub"+string(rune('0'+i)), "sub", i
		}
		j.Containers = append(j.Containers, api.Container{Container: c, KernelID: "kid-" + c.Host,
			Node: "node1", NodeAddr: "127.0.0.1", State: api.ContainerAssigned})
	}
	return j
}

func hosts(j api.Job) []string {
	var hs []string
	for _, c := range j.Containers {
		hs = append(hs, c.Host)
	}
	return hs
}

func sh(script string) []string { return []string{"sh", "-c", script} }

func TestAgentSessionLifecycle(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt string) {
		f := newFakeSchedd(t)
		cfg, _ := startAgent(t, f, rt)
		job := testJob(t, 7,
			sh(`echo "$BACKENDAI_CLUSTER_HOST $BACKENDAI_CLUSTER_SIZE $EPOCHS $(hostname)"; grep sub1 /etc/hosts; exit 3`),
			nil)
		f.set(api.Assignment{Job: job, Hosts: hosts(job)})

		u := f.waitState(t, 7, "main1", api.ContainerExited)
		if u.ExitCode != 3 {
			t.Errorf("main1 exit code = %d, want 3", u.ExitCode)
		}
		f.waitState(t, 7, "sub1", api.ContainerRunning)
		wantOrder(t, f.states(7, "main1"), api.ContainerPreparing, api.ContainerRunning, api.ContainerExited)

		out := runtimetest.ReadFile(t, filepath.Join(job.Cwd, "troupe-7.main1.out"))
		want := "main1 2 10"
		if rt == RuntimeRunc {
			want += " main1\n127.0.0.1\tsub1"
		}
		if !strings.HasPrefix(out, want) {
			t.Errorf("main1 output = %q, want prefix %q", out, want)
		}

		// main1 exited: schedd ends the session.
		job.KillWanted = true
		f.set(api.Assignment{Job: job, Hosts: hosts(job)})
		k := f.waitState(t, 7, "sub1", api.ContainerKilled)
		if k.Message == "" {
			t.Error("killed report carries no message")
		}
		f.set()
		assertNothingLeft(t, cfg, rt, "j7-")
	})
}

func wantOrder(t *testing.T, got []api.ContainerUpdate, want ...api.ContainerState) {
	t.Helper()
	var states []api.ContainerState
	for _, u := range got {
		states = append(states, u.State)
	}
	if strings.Join(toStrings(states), ",") != strings.Join(toStrings(want), ",") {
		t.Errorf("reported states %v, want %v", states, want)
	}
}

func toStrings(ss []api.ContainerState) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// assertNothingLeft checks the state dir and, for runc, runc's list and
// the processes of containers named with prefix.
func assertNothingLeft(t *testing.T, cfg Config, rt, prefix string) {
	t.Helper()
	empty := func() bool {
		for _, d := range []string{"containers", "files"} {
			ents, _ := os.ReadDir(filepath.Join(cfg.StateDir, d))
			if len(ents) > 0 {
				return false
			}
		}
		return true
	}
	if !runtimetest.WaitFor(10*time.Second, empty) {
		t.Errorf("state dir not empty: %s", lsR(cfg.StateDir))
	}
	if rt != RuntimeRunc {
		return
	}
	out, _ := exec.Command("runc", "--root", filepath.Join(cfg.StateDir, "runc"), "list", "-q").Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("runc still lists %q", s)
	}
	for _, id := range []string{prefix + "main1", prefix + "sub1"} {
		for _, p := range runc.CgroupPaths(id) {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("cgroup %s left", p)
			}
		}
	}
}

func lsR(dir string) string {
	var names []string
	_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
		names = append(names, p)
		return nil
	})
	return strings.Join(names, " ")
}

func TestAgentBkillStopsRunningSession(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt string) {
		f := newFakeSchedd(t)
		cfg, _ := startAgent(t, f, rt)
		// main1 ignores SIGTERM: the grace period and SIGKILL must end it.
		job := testJob(t, 8, sh(`trap "" TERM; echo up; while :; do sleep 0.1; done`), nil)
		f.set(api.Assignment{Job: job, Hosts: hosts(job)})
		f.waitState(t, 8, "sub1", api.ContainerRunning)
		out := filepath.Join(job.Cwd, "troupe-8.main1.out")
		if !runtimetest.WaitFor(10*time.Second, func() bool { b, _ := os.ReadFile(out); return len(b) > 0 }) {
			t.Fatal("main1 never said up")
		}
		job.KillWanted = true
		f.set(api.Assignment{Job: job, Hosts: hosts(job)})
		m := f.waitState(t, 8, "main1", api.ContainerKilled)
		if !strings.Contains(m.Message, "SIGKILL") {
			t.Errorf("main1 killed message = %q, want the SIGKILL escalation", m.Message)
		}
		f.waitState(t, 8, "sub1", api.ContainerKilled)
		assertNothingLeft(t, cfg, rt, "j8-")
	})
}

func TestAgentShutdownDestroysEverything(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt string) {
		f := newFakeSchedd(t)
		cfg, stop := startAgent(t, f, rt)
		job := testJob(t, 9, nil, nil)
		f.set(api.Assignment{Job: job, Hosts: hosts(job)})
		f.waitState(t, 9, "main1", api.ContainerRunning)
		f.waitState(t, 9, "sub1", api.ContainerRunning)
		stop()
		assertNothingLeft(t, cfg, rt, "j9-")
		for _, h := range []string{"main1", "sub1"} {
			if u := f.waitState(t, 9, h, api.ContainerKilled); !strings.Contains(u.Message, "shutting down") {
				t.Errorf("%s: message %q", h, u.Message)
			}
		}
	})
}

func TestAgentReconcileEdges(t *testing.T) {
	f := newFakeSchedd(t)
	startAgent(t, f, RuntimeProcess)
	killed := testJob(t, 20, sh("exit 0"))
	killed.KillWanted = true
	lost := testJob(t, 21, sh("exit 0"))
	lost.Containers[0].State = api.ContainerRunning
	done := testJob(t, 22, sh("exit 0"))
	done.Containers[0].State = api.ContainerExited
	badImage := testJob(t, 23, sh("exit 0"))
	badImage.Spec.Image = "pytorch-2.3"
	badOutput := testJob(t, 24, sh("exit 0"))
	badOutput.Spec.Output = "/nonexistent-dir/x.out"
	f.set(
		api.Assignment{Job: killed, Hosts: []string{"main1"}},
		api.Assignment{Job: lost, Hosts: []string{"main1"}},
		api.Assignment{Job: done, Hosts: []string{"main1"}},
		api.Assignment{Job: badImage, Hosts: []string{"main1"}},
		api.Assignment{Job: badOutput, Hosts: []string{"main1"}},
	)
	wantOrder(t, []api.ContainerUpdate{f.waitState(t, 20, "main1", api.ContainerKilled)}, api.ContainerKilled)
	if u := f.waitState(t, 21, "main1", api.ContainerFailed); !strings.Contains(u.Message, "lost") {
		t.Errorf("lost container message = %q", u.Message)
	}
	if u := f.waitState(t, 23, "main1", api.ContainerFailed); !strings.Contains(u.Message, "catalog") {
		t.Errorf("bad image message = %q", u.Message)
	}
	if u := f.waitState(t, 24, "main1", api.ContainerFailed); !strings.Contains(u.Message, "output") {
		t.Errorf("bad output message = %q", u.Message)
	}
	time.Sleep(100 * time.Millisecond)
	if got := f.states(22, "main1"); len(got) != 0 {
		t.Errorf("ended container got reports %+v", got)
	}
	if got := f.states(20, "main1"); len(got) != 1 {
		t.Errorf("kill-before-start reported %d times: %+v", len(got), got)
	}
}

func TestAgentRetriesReports(t *testing.T) {
	f := newFakeSchedd(t)
	f.failStatus = 3
	startAgent(t, f, RuntimeProcess)
	job := testJob(t, 30, sh("exit 5"))
	f.set(api.Assignment{Job: job, Hosts: hosts(job)})
	if u := f.waitState(t, 30, "main1", api.ContainerExited); u.ExitCode != 5 {
		t.Errorf("exit code = %d, want 5", u.ExitCode)
	}
	wantOrder(t, f.states(30, "main1"), api.ContainerPreparing, api.ContainerRunning, api.ContainerExited)
}

func TestAgentCleansLeftovers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: leftover cleanup test needs root for runc")
	}
	state := t.TempDir()
	r, err := runc.New("", state)
	if err != nil {
		t.Skipf("SKIP: needs runc: %v", err)
	}
	// A previous nodelet's container, bundle and hosts files.
	spec, _ := runtimetest.NewSpec(t, runtimetest.BuildInit(t), "sleep", "60")
	spec.ID, spec.Dir = "j99-main1", filepath.Join(state, "containers", "j99-main1")
	if _, err := r.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(state, "files", "j98-sub1"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFakeSchedd(t)
	cfg, _ := startAgentIn(t, f, RuntimeRunc, state)
	f.set()
	if !runtimetest.WaitFor(10*time.Second, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.registered > 0
	}) {
		t.Fatal("agent never registered")
	}
	assertNothingLeft(t, cfg, RuntimeRunc, "j99-")
	if pids := runtimetest.FindProcs(spec.ID); len(pids) > 0 {
		t.Errorf("leftover processes alive: %v", pids)
	}
}
