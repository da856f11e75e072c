package nodelet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/nodelet/network"
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

// startAgent runs an agent against s until the test ends; it returns
// the config and a stop function that cancels and waits for Run.
func startAgent(t *testing.T, s *testSchedd, rt string) (Config, func()) {
	t.Helper()
	return startAgentIn(t, s, rt, t.TempDir())
}

func startAgentIn(t *testing.T, s *testSchedd, rt, stateDir string) (Config, func()) {
	t.Helper()
	cfg, stop, _ := startAgentCause(t, s, rt, stateDir)
	return cfg, stop
}

// startAgentCause is startAgentIn that also returns detach, which stops
// the agent with ErrDetach (its containers keep running).
func startAgentCause(t *testing.T, s *testSchedd, rt, stateDir string, mods ...func(*Config)) (Config, func(), func()) {
	t.Helper()
	return runAgent(t, Config{Addr: s.hs.URL}, parts{}, rt, stateDir, mods...)
}

// runAgent is startAgentCause for cfg, which names schedd (Addr, or the
// fake in p.schedd).
func runAgent(t *testing.T, cfg Config, p parts, rt, stateDir string, mods ...func(*Config)) (Config, func(), func()) {
	t.Helper()
	cfg.Name, cfg.StateDir, cfg.Runtime = "node1", stateDir, rt
	cfg.CPU, cfg.Memory, cfg.InitBinary, cfg.SSHBinary = 2, 1<<30, runtimetest.BuildInit(t), buildSSH(t)
	cfg.FenceBinary, cfg.Heartbeat, cfg.StopGrace = buildFence(t), 50*time.Millisecond, time.Second
	for _, m := range mods {
		m(&cfg)
	}
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancel := func() { cancelCause(nil) }
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	go func() { done <- run(ctx, cfg, log, p) }()
	stopped := false
	stopWith := func(cause error) {
		if stopped {
			return
		}
		stopped = true
		cancelCause(cause)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
	}
	stop := func() { stopWith(nil) }
	_ = cancel
	t.Cleanup(stop)
	return cfg, stop, func() { stopWith(ErrDetach) }
}

func uid() int { return os.Getuid() }
func gid() int { return os.Getgid() }

func sh(script string) []string { return []string{"sh", "-c", script} }

func TestAgentSessionLifecycle(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt string) {
		s := newTestSchedd(t)
		cfg, _ := startAgent(t, s, rt)
		cwd := t.TempDir()
		id := s.submit(t, cwd, nil,
			sh(`echo "$BACKENDAI_CLUSTER_HOST $BACKENDAI_CLUSTER_SIZE $EPOCHS $(hostname)"; grep sub1 /etc/hosts; exit 3`),
			nil)

		u := s.waitState(t, id, "main1", api.ContainerExited)
		if u.ExitCode != 3 {
			t.Errorf("main1 exit code = %d, want 3", u.ExitCode)
		}
		s.waitState(t, id, "sub1", api.ContainerRunning)
		main1 := s.states(id, "main1")
		wantOrder(t, started(main1), api.ContainerRunning, api.ContainerExited)
		for _, u := range main1 {
			if u.State == api.ContainerRunning && u.Starting <= 0 {
				t.Errorf("main1's running update has Starting %v, want how long its start took", u.Starting)
			}
		}

		// main1 exited: schedd ends the session, the nodelet stops sub1.
		k := s.waitState(t, id, "sub1", api.ContainerKilled)
		if k.Message == "" {
			t.Error("killed report carries no message")
		}
		j := s.waitJob(t, id, func(j api.Job) bool { return j.State.Terminal() })
		if j.State != api.JobFailed || j.ExitCode != 3 {
			t.Errorf("job ended %s exit %d, want FAILED 3", j.State, j.ExitCode)
		}
		out := runtimetest.ReadFile(t, filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", id)))
		want := "main1 2 10"
		if rt == RuntimeRunc {
			// Each container has its own address on the session network.
			want += " main1\n" + j.Containers[1].Addr + "\tsub1"
		}
		if !strings.HasPrefix(out, want) {
			t.Errorf("main1 output = %q, want prefix %q", out, want)
		}
		assertNothingLeft(t, cfg, rt, s.containerIDs(t, id))
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

// started is got without its preparing update: the report queue drops
// it when the container's next update comes within report.PreparingHold
// (the start was quick), and sends it otherwise (a slow machine).
func started(got []api.ContainerUpdate) []api.ContainerUpdate {
	var out []api.ContainerUpdate
	for _, u := range got {
		if u.State != api.ContainerPreparing {
			out = append(out, u)
		}
	}
	return out
}

func toStrings(ss []api.ContainerState) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// runDirOf is cfg's run directory (Config.RunDir's default for a state
// directory of a test's own).
func runDirOf(cfg Config) string { return cmp.Or(cfg.RunDir, filepath.Join(cfg.StateDir, "run")) }

// assertNothingLeft checks the state and run dirs (and where nodelets
// from before the run dir kept containers) and, for runc, runc's list
// and the processes of containers named with prefix.
func assertNothingLeft(t *testing.T, cfg Config, rt string, ids []string) {
	t.Helper()
	run := runDirOf(cfg)
	dirs := []string{filepath.Join(run, "containers"), filepath.Join(run, "files"), filepath.Join(run, "pins"),
		filepath.Join(run, "records"), filepath.Join(cfg.StateDir, "homes"), filepath.Join(cfg.StateDir, "records"),
		filepath.Join(cfg.StateDir, "containers"), filepath.Join(cfg.StateDir, "files")}
	empty := func() bool {
		for _, d := range dirs {
			ents, _ := os.ReadDir(d)
			if len(ents) > 0 {
				return false
			}
		}
		return true
	}
	if !eventually.Within(10*time.Second, empty) {
		t.Errorf("state dir not empty: %s", lsR(cfg.StateDir))
	}
	if rt != RuntimeRunc {
		return
	}
	// A container's default veth goes with its namespace, a moment after.
	var links []string
	if !eventually.Within(5*time.Second, func() bool { links, _ = network.Links(); return len(links) == 0 }) {
		t.Errorf("session links left: %v", links)
	}
	// Pins: the run directory's, and the state directory's of nodelets
	// from before it (and its pool, which the first start after them
	// sweeps; the run directory's pool lives as long as the nodelet).
	for _, d := range []string{filepath.Join(run, "netns"), filepath.Join(cfg.StateDir, "netns"), filepath.Join(cfg.StateDir, "netns-pool")} {
		if d == filepath.Join(run, "netns-pool") {
			continue // the old layout's run directory was the state directory
		}
		if ents, _ := os.ReadDir(d); len(ents) > 0 {
			t.Errorf("pinned netns left in %s: %v", d, ents)
		}
	}
	for _, root := range []string{filepath.Join(run, "runc"), runc.LibcontainerRoot(run), filepath.Join(cfg.StateDir, "runc"), runc.LibcontainerRoot(cfg.StateDir)} {
		out, _ := exec.Command("runc", "--root", root, "list", "-q").Output()
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("runc --root %s still lists %q", root, s)
		}
	}
	for _, id := range ids {
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
		s := newTestSchedd(t)
		cfg, _ := startAgent(t, s, rt)
		cwd := t.TempDir()
		// main1 ignores SIGTERM: the grace period and SIGKILL must end it.
		id := s.submit(t, cwd, nil, sh(`trap "" TERM; echo up; while :; do sleep 0.1; done`), nil)
		s.waitState(t, id, "sub1", api.ContainerRunning)
		out := filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", id))
		if !eventually.Within(10*time.Second, func() bool { b, _ := os.ReadFile(out); return len(b) > 0 }) {
			t.Fatal("main1 never said up")
		}
		if _, err := s.cli.Kill(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		m := s.waitState(t, id, "main1", api.ContainerKilled)
		if !strings.Contains(m.Message, "SIGKILL") {
			t.Errorf("main1 killed message = %q, want the SIGKILL escalation", m.Message)
		}
		s.waitState(t, id, "sub1", api.ContainerKilled)
		if j := s.waitJob(t, id, func(j api.Job) bool { return j.State.Terminal() }); j.State != api.JobCancelled {
			t.Errorf("killed job ended %s", j.State)
		}
		assertNothingLeft(t, cfg, rt, s.containerIDs(t, id))
	})
}

func TestAgentShutdownDestroysEverything(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, rt string) {
		s := newTestSchedd(t)
		cfg, stop := startAgent(t, s, rt)
		id := s.submit(t, t.TempDir(), nil, sh("sleep 600"), nil)
		s.waitState(t, id, "main1", api.ContainerRunning)
		s.waitState(t, id, "sub1", api.ContainerRunning)
		stop()
		assertNothingLeft(t, cfg, rt, s.containerIDs(t, id))
		for _, h := range []string{"main1", "sub1"} {
			if u := s.waitState(t, id, h, api.ContainerKilled); !strings.Contains(u.Message, "shutting down") {
				t.Errorf("%s: message %q", h, u.Message)
			}
		}
	})
}

// TestAgentReconcileEdges drives the reconcile table (reconcile.go) with
// assignments as schedd would send them after a nodelet crashed or while
// a job is being killed: a job killed before it started, a container a
// previous nodelet left running (lost) or ended, an ending session,
// starts that fail, and running containers whose job is killed or taken
// off the node. Each gets one report, and later answers add none.
func TestAgentReconcileEdges(t *testing.T) {
	f := newFakeSchedd()
	const killed, lost, done, badImage, badOutput, bkilled, gone, later = 1, 2, 3, 4, 5, 6, 7, 8
	job := func(id uint64, edit func(*jobspec.Job), cmds ...[]string) api.AssignedJob {
		return fakeJob(t, id, t.TempDir(), edit, cmds...)
	}
	k := job(killed, nil, sh("exit 0"))
	k.KillWanted = true
	l := job(lost, nil, sh("sleep 60"))
	l.Containers[0].State = api.ContainerRunning
	d := job(done, nil, sh("exit 0"), nil)
	d.KillWanted = true
	d.Containers[0].State, d.Containers[0].ExitCode, d.Containers[1].State = api.ContainerExited, 0, api.ContainerRunning
	for _, j := range []api.AssignedJob{k, l, d,
		job(badImage, func(j *jobspec.Job) { j.Image = "pytorch-2.3" }, sh("exit 0")),
		job(badOutput, func(j *jobspec.Job) { j.Output = "/dev/null/x.out" }, sh("exit 0")),
		job(bkilled, nil, sh(`trap "" TERM; while :; do sleep 0.1; done`)),
		job(gone, nil, sh("sleep 60")),
	} {
		f.assign(j)
	}
	startFakeAgent(t, f, RuntimeProcess, t.TempDir())

	if u := f.waitState(t, killed, "main1", api.ContainerKilled); !strings.Contains(u.Message, "before it started") {
		t.Errorf("kill before start: message = %q", u.Message)
	}
	if u := f.waitState(t, lost, "main1", api.ContainerFailed); !strings.Contains(u.Message, "lost") {
		t.Errorf("lost container message = %q", u.Message)
	}
	// The session is ending (KillWanted): its sub is reported killed.
	if u := f.waitState(t, done, "sub1", api.ContainerKilled); !strings.Contains(u.Message, "before it started") {
		t.Errorf("sub of an ending session: message = %q", u.Message)
	}
	if u := f.waitState(t, badImage, "main1", api.ContainerFailed); !strings.Contains(u.Message, "catalog") {
		t.Errorf("bad image message = %q", u.Message)
	}
	if u := f.waitState(t, badOutput, "main1", api.ContainerFailed); !strings.Contains(u.Message, "output") {
		t.Errorf("bad output message = %q", u.Message)
	}
	// Running here, then killed (bkill: KillWanted, main1 ignores
	// SIGTERM) or taken off the node: stopped.
	f.waitState(t, bkilled, "main1", api.ContainerRunning)
	f.waitState(t, gone, "main1", api.ContainerRunning)
	f.update(bkilled, func(j *api.AssignedJob) {
		j.KillWanted, j.Containers[0].State = true, api.ContainerRunning
	})
	f.unassign(gone)
	if u := f.waitState(t, bkilled, "main1", api.ContainerKilled); !strings.Contains(u.Message, "SIGKILL") {
		t.Errorf("killed main1 message = %q, want the SIGKILL escalation", u.Message)
	}
	f.waitState(t, gone, "main1", api.ContainerKilled)

	// A later answer (a new job's) reports nothing again.
	f.assign(job(later, nil, sh("exit 0")))
	f.waitState(t, later, "main1", api.ContainerExited)
	for _, c := range []struct {
		id   uint64
		host string
		n    int
	}{{killed, "main1", 1}, {lost, "main1", 1}, {done, "main1", 0}, {done, "sub1", 1},
		{badImage, "main1", 1}, {badOutput, "main1", 1}} { // failed
		if got := started(f.states(c.id, c.host)); len(got) != c.n {
			t.Errorf("job %d %s: %d reports, want %d: %+v", c.id, c.host, len(got), c.n, got)
		}
	}
}

// TestAgentRetriesReports: reports schedd refuses are sent again, in
// order, until it takes them.
func TestAgentRetriesReports(t *testing.T) {
	f := newFakeSchedd()
	f.failReports = 3
	startFakeAgent(t, f, RuntimeProcess, t.TempDir())
	f.assign(fakeJob(t, 1, t.TempDir(), nil, sh("exit 5")))
	if u := f.waitState(t, 1, "main1", api.ContainerExited); u.ExitCode != 5 {
		t.Errorf("exit code = %d, want 5", u.ExitCode)
	}
	wantOrder(t, started(f.states(1, "main1")), api.ContainerRunning, api.ContainerExited)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failReports != 0 {
		t.Errorf("%d refusals left: the agent sent fewer reports than were refused", f.failReports)
	}
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
	// Its session network: a bridge, a VXLAN with an FDB entry, a veth,
	// a pinned namespace (where a nodelet from before the run directory
	// pinned it), and another one's in the run directory.
	pin := filepath.Join(state, "netns", "j99-main1")
	runPin := filepath.Join(state, "run", "netns", "j97-main1")
	for _, c := range [][]string{
		{"ip", "link", "add", "trb9999", "type", "bridge"},
		{"ip", "link", "add", "trx9999", "type", "vxlan", "id", "9999", "local", "127.0.0.1", "dstport", "4789"},
		{"bridge", "fdb", "append", "00:00:00:00:00:00", "dev", "trx9999", "dst", "127.0.0.2"},
		{"ip", "link", "add", "trv9999-0", "type", "veth", "peer", "name", "trv9999-p"},
		{"mkdir", "-p", filepath.Dir(pin)}, {"touch", pin},
		{"unshare", "--net=" + pin, "true"},
		{"mkdir", "-p", filepath.Dir(runPin)}, {"touch", runPin},
		{"unshare", "--net=" + runPin, "true"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	s := newTestSchedd(t)
	cfg, _ := startAgentIn(t, s, RuntimeRunc, state)
	if !eventually.Within(10*time.Second, func() bool { return s.registered("node1") }) {
		t.Fatal("agent never registered")
	}
	assertNothingLeft(t, cfg, RuntimeRunc, []string{spec.ID})
	if _, err := os.Stat(filepath.Dir(pin)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old layout's netns directory is left: %v", err)
	}
	if pids := runtimetest.FindProcs(spec.ID); len(pids) > 0 {
		t.Errorf("leftover processes alive: %v", pids)
	}
}

// busyboxRootfs is an image holding nothing but busybox (Debian's
// busybox-static) and its applet links.
func busyboxRootfs(t *testing.T) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("SKIP: needs busybox-static (`make deps` installs it)")
	}
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" && applet != "ssh" {
			_ = os.Symlink("busybox", filepath.Join(root, "bin", applet))
		}
	}
	return root
}

// TestAgentSSHInBusybox: in an image with nothing but busybox, main1
// reaches sub1 by name over troupe's ssh with no prompt, passes
// environment, and gets the remote exit status; the key files are the
// job user's alone.
func TestAgentSSHInBusybox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: session networks need root")
	}
	if _, err := runc.Find(""); err != nil {
		t.Skip("SKIP: needs runc")
	}
	root := busyboxRootfs(t)
	s := newTestSchedd(t)
	cfg, _ := startAgent(t, s, RuntimeRunc)
	cwd := t.TempDir()
	if err := os.Chmod(cwd, 0o777); err != nil {
		t.Fatal(err)
	}
	handTo(t, 1000, 1000, root, cwd) // a rootfs by path is the job user's own
	res, err := s.cli.Submit(context.Background(), api.SubmitRequest{Cwd: cwd, User: "bob", UID: 1000, GID: 1000,
		Spec: wire.ToAPI(jobspec.Job{Name: "ssh", Image: root, Cluster: jobspec.Cluster{Size: 2, Mode: jobspec.ModeSingleNode},
			Resources: jobspec.Resources{CPU: 0.5, Memory: 64 << 20},
			Command: sh(`set -e; ls -ln ~/.ssh | sed 1d | awk '{print $1, $3, $9}' | sort
ssh sub1 hostname
FOO=bar ssh -o SendEnv=FOO sub1 'echo foo=$FOO uid=$(id -u) rank=$RANK'
ssh sub1 exit 7 || echo status=$?
echo tty=$(ssh -t sub1 tty)
printf 'hostname\nexit 4\n' | ssh -t sub1 >/dev/null || echo shell=$?`)})})
	if err != nil {
		t.Fatal(err)
	}
	id := res.JobID
	// Once the containers started, their files are complete (the nodelet
	// writes them as root, then hands them over): on the node, the key
	// is readable by the job's user (and root) only.
	s.waitJob(t, id, func(j api.Job) bool { return j.State == api.JobRunning || j.State.Terminal() })
	keys, _ := filepath.Glob(filepath.Join(runDirOf(cfg), "files", "*", "ssh", "id_cluster"))
	for _, k := range keys {
		fi, err := os.Stat(k)
		if err != nil {
			continue // the container already ended
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != 0o600 || st.Uid != 1000 {
			t.Errorf("%s: mode %v uid %d, want 0600 uid 1000", k, fi.Mode().Perm(), st.Uid)
		}
	}
	j := s.waitJob(t, id, func(j api.Job) bool { return j.State.Terminal() })
	out := runtimetest.ReadFile(t, filepath.Join(cwd, fmt.Sprintf("troupe-%d.main1.out", id)))
	if j.State != api.JobCompleted {
		t.Fatalf("job ended %s (%s):\n%s", j.State, j.Reason, out)
	}
	want := "-rw------- 1000 authorized_keys\n-rw------- 1000 config\n-rw------- 1000 id_cluster\n-rw-r--r-- 1000 id_cluster.pub\n" +
		"sub1\nfoo=bar uid=1000 rank=1\nstatus=7\ntty=/dev/pts/0\nshell=4"
	if out = strings.ReplaceAll(out, "\r", ""); out != want { // the pty's ONLCR
		t.Errorf("main1 output:\n%q\nwant:\n%q", out, want)
	}
	if strings.Contains(runtimetest.ReadFile(t, filepath.Join(cwd, fmt.Sprintf("troupe-%d.sub1.out", id))), "PRIVATE KEY") {
		t.Error("the private key reached the job's output")
	}
	assertNothingLeft(t, cfg, RuntimeRunc, s.containerIDs(t, id))
}
