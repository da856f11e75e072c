package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/eventually"
	rt "github.com/troupe-hpc/troupe/nodelet/runtime"
)

// Options adjust the suite to a driver.
type Options struct {
	// Image, when set, is put in every Spec instead of ImageHost: a
	// rootfs, OCI layout or archive, or SIF holding /bin/sh, sleep, pwd,
	// true and an /usr directory (see BusyboxRootfs).
	Image string
	// Init is a troupe-init binary already built; empty: BuildInit.
	Init string
	// NoUnprivileged, when set, says why the driver cannot run a
	// container as uid 65534 on this machine; the tests that attack as
	// that user skip with it.
	NoUnprivileged string
	// NoCPUs, when set, says why the driver does not confine a
	// container to Spec.CPUs; the cpuset test skips with it.
	NoCPUs string
}

// Run runs the behaviour suite against r, one subtest per behaviour.
func Run(t *testing.T, r rt.Runtime) { RunWith(t, r, Options{}) }

// RunWith is Run with options.
func RunWith(t *testing.T, r rt.Runtime, o Options) {
	skipUnlessLinux(t)
	init := o.Init
	if init == "" {
		init = BuildInit(t)
	}
	if o.Image != "" {
		r = imageRuntime{r, o.Image}
	}
	cases := []struct {
		name string
		fn   func(*testing.T, rt.Runtime, string)
	}{
		{"ExitCode", testExitCode},
		{"Output", testOutput},
		{"Env", testEnv},
		{"Workdir", testWorkdir},
		{"SignalWait", testSignalWait},
		{"WaitForeverStopsOnSIGTERM", testWaitForever},
		{"DestroyIdempotentLeavesNothing", testDestroy},
		{"DestroyAfterExit", testDestroyAfterExit},
		{"InvalidSpec", testInvalidSpec},
		{"RecoverRunning", testRecoverRunning},
		{"RecoverExited", testRecoverExited},
		{"RecoverUnknown", testRecoverUnknown},
		{"Terminal", testTerminal},
		{"TerminalNotRedirectable", testTerminalNotRedirectable},
		{"ExitStatusNotRedirectable", testExitNotRedirectable},
		{"Usage", testUsage},
		{"CPUs", testCPUs},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasSuffix(tc.name, "NotRedirectable") && o.NoUnprivileged != "" {
				t.Skipf("SKIP: %s", o.NoUnprivileged)
			}
			if tc.name == "CPUs" && o.NoCPUs != "" {
				t.Skipf("SKIP: %s", o.NoCPUs)
			}
			tc.fn(t, r, init)
		})
	}
}

// imageRuntime sets Image on every Spec it starts.
type imageRuntime struct {
	rt.Runtime
	image string
}

func (r imageRuntime) Start(ctx context.Context, s rt.Spec) (rt.Container, error) {
	s.Image = r.image
	return r.Runtime.Start(ctx, s)
}

func testExitCode(t *testing.T, r rt.Runtime, init string) {
	spec, _ := NewSpec(t, init, "sh", "-c", "exit 3")
	c := Start(t, r, spec)
	if e := WaitExit(t, c, 10*time.Second); e.Code != 3 {
		t.Fatalf("exit = %+v, want code 3", e)
	}
	// Wait again: same answer.
	if e := WaitExit(t, c, time.Second); e.Code != 3 {
		t.Fatalf("second wait = %+v, want code 3", e)
	}
}

func testOutput(t *testing.T, r rt.Runtime, init string) {
	spec, _ := NewSpec(t, init, "sh", "-c", "echo to-out; echo to-err >&2")
	dir := t.TempDir()
	out, _ := os.Create(dir + "/stdout")
	errf, _ := os.Create(dir + "/stderr")
	spec.Stdout, spec.Stderr = out, errf
	c := Start(t, r, spec)
	out.Close() // the caller may close its copies right after Start
	errf.Close()
	WaitExit(t, c, 10*time.Second)
	if got := ReadFile(t, dir+"/stdout"); got != "to-out" {
		t.Errorf("stdout = %q, want to-out", got)
	}
	if got := ReadFile(t, dir+"/stderr"); got != "to-err" {
		t.Errorf("stderr = %q, want to-err", got)
	}
}

func testEnv(t *testing.T, r rt.Runtime, init string) {
	spec, outPath := NewSpec(t, init, "sh", "-c", `echo "$FOO|$BAR"`)
	spec.Env = append(spec.Env, "FOO=hello world", "BAR=b=c")
	WaitExit(t, Start(t, r, spec), 10*time.Second)
	if got := ReadFile(t, outPath); got != "hello world|b=c" {
		t.Errorf("env seen = %q, want %q", got, "hello world|b=c")
	}
}

func testWorkdir(t *testing.T, r rt.Runtime, init string) {
	spec, outPath := NewSpec(t, init, "pwd")
	spec.Workdir = "/usr"
	WaitExit(t, Start(t, r, spec), 10*time.Second)
	if got := ReadFile(t, outPath); got != "/usr" {
		t.Errorf("pwd = %q, want /usr", got)
	}
}

func testSignalWait(t *testing.T, r rt.Runtime, init string) {
	spec, outPath := NewSpec(t, init, "sh", "-c", "echo ready; exec sleep 60")
	c := Start(t, r, spec)
	if !eventually.Within(10*time.Second, func() bool { b, _ := os.ReadFile(outPath); return len(b) > 0 }) {
		t.Fatal("command never printed ready")
	}
	if err := c.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal: %v", err)
	}
	e := WaitExit(t, c, 10*time.Second)
	if e.Code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit = %+v, want code %d", e, 128+int(syscall.SIGTERM))
	}
	if err := c.Signal(syscall.SIGTERM); !errors.Is(err, rt.ErrNotRunning) {
		t.Errorf("signal after exit = %v, want ErrNotRunning", err)
	}
}

// testWaitForever: no Args means troupe-init wait, which ends cleanly on
// SIGTERM. The signal is repeated because the runtime may deliver it
// before init has installed its handler.
func testWaitForever(t *testing.T, r rt.Runtime, init string) {
	spec, _ := NewSpec(t, init)
	c := Start(t, r, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	if _, err := c.Wait(ctx); err == nil {
		t.Fatal("wait-forever container exited by itself")
	}
	cancel()
	exited := eventually.Within(10*time.Second, func() bool {
		_ = c.Signal(syscall.SIGTERM)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Wait(ctx)
		return err == nil
	})
	if !exited {
		t.Fatal("wait-forever container ignored SIGTERM")
	}
	if e := WaitExit(t, c, time.Second); e.Code != 0 {
		t.Errorf("exit = %+v, want 0", e)
	}
}

func testDestroy(t *testing.T, r rt.Runtime, init string) {
	spec, _ := NewSpec(t, init, "sh", "-c", "sleep 60 & sleep 60 & wait")
	c, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if !eventually.Within(10*time.Second, func() bool { return len(FindProcs(spec.ID)) >= 3 }) {
		t.Fatalf("processes of %s never showed up: %v", spec.ID, FindProcs(spec.ID))
	}
	for i := range 2 {
		if err := c.Destroy(context.Background()); err != nil {
			t.Fatalf("destroy #%d: %v", i+1, err)
		}
	}
	if pids := FindProcs(spec.ID); len(pids) > 0 {
		t.Errorf("processes left after destroy: %v", pids)
	}
	if _, err := os.Stat(spec.Dir); !os.IsNotExist(err) {
		t.Errorf("dir %s left after destroy (stat: %v)", spec.Dir, err)
	}
	WaitExit(t, c, time.Second)
	if err := c.Signal(syscall.SIGTERM); !errors.Is(err, rt.ErrNotRunning) {
		t.Errorf("signal after destroy = %v, want ErrNotRunning", err)
	}
}

func testDestroyAfterExit(t *testing.T, r rt.Runtime, init string) {
	spec, _ := NewSpec(t, init, "true")
	c, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	WaitExit(t, c, 10*time.Second)
	if err := c.Destroy(context.Background()); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if _, err := os.Stat(spec.Dir); !os.IsNotExist(err) {
		t.Errorf("dir %s left after destroy", spec.Dir)
	}
}

func testInvalidSpec(t *testing.T, r rt.Runtime, init string) {
	spec, _ := NewSpec(t, init, "true")
	spec.ID = "bad id/" + strconv.Itoa(1)
	if _, err := r.Start(context.Background(), spec); !errors.Is(err, rt.ErrInvalidSpec) {
		t.Errorf("start with bad id = %v, want ErrInvalidSpec", err)
	}
}

// recoverOrSkip calls Recover, skipping loudly for drivers whose
// containers do not outlive the nodelet.
func recoverOrSkip(t *testing.T, r rt.Runtime, id, dir string) rt.Container {
	t.Helper()
	c, err := r.Recover(context.Background(), id, dir)
	if errors.Is(err, rt.ErrUnsupported) {
		t.Skipf("SKIP: %s cannot re-attach to containers (Recover: %v)", r.Name(), err)
	}
	if err != nil {
		t.Fatalf("recover %s: %v", id, err)
	}
	t.Cleanup(func() { _ = c.Destroy(context.Background()) })
	return c
}

// testRecoverRunning: a second Container value for a running container
// waits for, signals and destroys the same container.
func testRecoverRunning(t *testing.T, r rt.Runtime, init string) {
	spec, outPath := NewSpec(t, init, "sh", "-c", "echo ready; exec sleep 60")
	c := Start(t, r, spec)
	if !eventually.Within(10*time.Second, func() bool { b, _ := os.ReadFile(outPath); return len(b) > 0 }) {
		t.Fatal("command never printed ready")
	}
	again := recoverOrSkip(t, r, spec.ID, spec.Dir)
	if again.ID() != spec.ID {
		t.Errorf("recovered id = %q, want %q", again.ID(), spec.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := again.Wait(ctx); err == nil {
		t.Fatal("recovered container reported an exit while running")
	}
	if err := again.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal: %v", err)
	}
	for _, w := range []rt.Container{again, c} {
		if e := WaitExit(t, w, 10*time.Second); e.Code != 128+int(syscall.SIGTERM) {
			t.Errorf("exit = %+v, want code %d", e, 128+int(syscall.SIGTERM))
		}
	}
	if err := again.Destroy(context.Background()); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if pids := FindProcs(spec.ID); len(pids) > 0 {
		t.Errorf("processes left after destroy: %v", pids)
	}
	if _, err := os.Stat(spec.Dir); !os.IsNotExist(err) {
		t.Errorf("dir %s left after destroy (stat: %v)", spec.Dir, err)
	}
}

// testRecoverExited: a container that exited while nobody watched still
// tells its exit code.
func testRecoverExited(t *testing.T, r rt.Runtime, init string) {
	spec, _ := NewSpec(t, init, "sh", "-c", "exit 4")
	c := Start(t, r, spec)
	WaitExit(t, c, 10*time.Second)
	again := recoverOrSkip(t, r, spec.ID, spec.Dir)
	if e := WaitExit(t, again, 5*time.Second); e.Code != 4 {
		t.Errorf("recovered exit = %+v, want code 4", e)
	}
	if err := again.Signal(syscall.SIGTERM); !errors.Is(err, rt.ErrNotRunning) {
		t.Errorf("signal after exit = %v, want ErrNotRunning", err)
	}
}

// testRecoverUnknown: a container the runtime does not know is
// ErrNotFound.
func testRecoverUnknown(t *testing.T, r rt.Runtime, init string) {
	_, err := r.Recover(context.Background(), "troupe-never-started-"+randHex(4), t.TempDir())
	switch {
	case errors.Is(err, rt.ErrUnsupported):
		t.Skipf("SKIP: %s cannot re-attach to containers (Recover: %v)", r.Name(), err)
	case !errors.Is(err, rt.ErrNotFound):
		t.Errorf("recover of an unknown container = %v, want ErrNotFound", err)
	}
}

// testTerminal: a Spec.TTY command runs on a terminal once a client
// attached to the container's socket; input and output cross it, the
// exit status reaches the client and Wait, and the output is also in
// the container's stdout. Drivers without terminals refuse the spec.
func testTerminal(t *testing.T, r rt.Runtime, init string) {
	spec, outPath := NewSpec(t, init, "sh", "-c", `test -t 0 && echo on-a-tty; read x; echo "got:$x"; exit 6`)
	spec.TTY = true
	c, err := r.Start(context.Background(), spec)
	if errors.Is(err, rt.ErrUnsupported) {
		t.Skipf("%s has no terminals: %v", r.Name(), err)
	}
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy(context.Background()) })
	term, ok := c.(rt.Terminal)
	if !ok {
		t.Fatalf("%s started a TTY container that is no rt.Terminal", r.Name())
	}
	var conn io.ReadWriteCloser
	for deadline := time.Now().Add(10 * time.Second); ; {
		if conn, err = term.DialTerminal(); err == nil {
			break
		}
		if errors.Is(err, attach.ErrUntrusted) || time.Now().After(deadline) {
			t.Fatalf("attach socket: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	in, inw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	defer inw.Close()
	if _, err := inw.WriteString("typed\n"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	code, err := attach.Run(conn, in, &out)
	if err != nil || code != 6 {
		t.Fatalf("attach.Run = %d, %v; terminal showed %q", code, err, out.String())
	}
	for _, want := range []string{"on-a-tty", "got:typed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("terminal showed %q, want %q in it", out.String(), want)
		}
	}
	if e := WaitExit(t, c, 10*time.Second); e.Code != 6 {
		t.Errorf("exit = %+v, want code 6", e)
	}
	if got := ReadFile(t, outPath); !strings.Contains(got, "got:typed") {
		t.Errorf("stdout (the transcript) = %q, want the terminal's output", got)
	}
}

// testUsage: a container that counts for a while reports CPU time and a
// peak memory once it has exited, before Destroy.
func testUsage(t *testing.T, r rt.Runtime, init string) {
	spec, _ := NewSpec(t, init, "sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done")
	c := Start(t, r, spec)
	if e := WaitExit(t, c, 60*time.Second); e.Code != 0 {
		t.Fatalf("exit = %+v", e)
	}
	u := c.Usage()
	if u.CPU < 10*time.Millisecond || u.MemPeak <= 0 {
		t.Errorf("usage = %+v, want some CPU time and a peak memory", u)
	}
	t.Logf("usage: %v CPU, %d KiB peak", u.CPU, u.MemPeak>>10)
}

// testCPUs: two containers given one CPU each, running together, see
// only their own (Cpus_allowed_list), so that MPI's default binding to
// cores in each never lands on the same core.
func testCPUs(t *testing.T, r rt.Runtime, init string) {
	cpus := AllowedCPUs(t)
	if len(cpus) < 2 {
		t.Skipf("SKIP: needs 2 CPUs this process may run on, has %v", cpus)
	}
	type one struct {
		c   rt.Container
		out string
		cpu int
	}
	var both []one
	for _, cpu := range cpus[:2] {
		spec, out := NewSpec(t, init, "sh", "-c", "grep Cpus_allowed_list /proc/self/status; exec sleep 60")
		spec.CPUMilli, spec.CPUs = 1000, []int{cpu}
		both = append(both, one{Start(t, r, spec), out, cpu})
	}
	for _, o := range both {
		want := fmt.Sprintf("Cpus_allowed_list:\t%d", o.cpu)
		if !eventually.Within(10*time.Second, func() bool { return strings.Contains(ReadFile(t, o.out), want) }) {
			t.Errorf("container given CPU %d: %q, want %q", o.cpu, ReadFile(t, o.out), want)
		}
	}
	for _, o := range both {
		if err := o.c.Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// AllowedCPUs lists the CPUs this process may run on.
func AllowedCPUs(t testing.TB) []int {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var out []int
	for i := 0; i < 1024 && len(out) < set.Count(); i++ {
		if set.IsSet(i) {
			out = append(out, i)
		}
	}
	return out
}

// openUp makes dir and its parent (a t.TempDir's) searchable by every
// user, so that an unprivileged container user reaches what is in it.
func openUp(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// unprivileged returns a copy of init that uid 65534 may run, and
// adjusts spec to run as that user (the attacker of issue 19); it skips
// without root.
func unprivileged(t *testing.T, init string, spec *rt.Spec) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: running a container as uid 65534 needs root")
	}
	dir := t.TempDir()
	openUp(t, dir)
	b, err := os.ReadFile(init)
	if err != nil {
		t.Fatal(err)
	}
	spec.Init = filepath.Join(dir, "troupe-init")
	if err := os.WriteFile(spec.Init, b, 0o755); err != nil {
		t.Fatal(err)
	}
	spec.UID, spec.GID = 65534, 65534
}

// testTerminalNotRedirectable: a terminal command running as an
// unprivileged user replaces every attach socket path it can name with
// a symlink to another socket (on the node, schedd's would give it root
// on schedd's API, issue 19). The driver's next connection still reaches
// the container's terminal, and the other socket is never dialled.
func testTerminalNotRedirectable(t *testing.T, r rt.Runtime, init string) {
	spec, _ := NewSpec(t, init)
	unprivileged(t, init, &spec)
	spec.Workdir = "/"
	decoyDir := t.TempDir()
	openUp(t, decoyDir)
	decoy := filepath.Join(decoyDir, "decoy.sock")
	ln, err := net.Listen("unix", decoy)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(decoy, 0o777); err != nil {
		t.Fatal(err)
	}
	dialled := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case dialled <- struct{}{}:
			default:
			}
		}
	}()
	// Where the socket was (runc's old status directory), and where
	// the drivers keep it now.
	var paths []string
	for _, p := range []string{"/.troupe/status", spec.Dir, spec.Dir + "/status", spec.Dir + "/private"} {
		paths = append(paths, p+"/"+attach.SocketName)
	}
	spec.Args = []string{"sh", "-c", `for p in "$@"; do rm -f "$p" 2>/dev/null; ln -s ` + decoy +
		` "$p" 2>/dev/null && echo "replaced $p"; done; echo attacked; read x; echo "got:$x"; exit 4`, "sh"}
	spec.Args = append(spec.Args, paths...)
	spec.TTY = true
	c, err := r.Start(context.Background(), spec)
	if errors.Is(err, rt.ErrUnsupported) {
		t.Skipf("%s has no terminals: %v", r.Name(), err)
	}
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy(context.Background()) })
	term := c.(rt.Terminal)
	dial := func() io.ReadWriteCloser {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			conn, err := term.DialTerminal()
			if err == nil {
				return conn
			}
			if errors.Is(err, attach.ErrUntrusted) || time.Now().After(deadline) {
				t.Fatalf("attach socket: %v", err)
			}
		}
	}
	// The first client starts the command, which attacks.
	first := dial()
	_ = first.(net.Conn).SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := attach.WriteWindow(first, 24, 80); err != nil {
		t.Fatal(err)
	}
	fr := attach.NewReader(first)
	var shown strings.Builder
	for !strings.Contains(shown.String(), "attacked") {
		f, err := fr.Next()
		if err != nil {
			t.Fatalf("first client: %v (terminal showed %q)", err, shown.String())
		}
		shown.Write(f.Payload)
	}
	first.Close()
	// The second one must reach the same terminal.
	second := dial()
	_ = second.(net.Conn).SetDeadline(time.Now().Add(20 * time.Second))
	in := strings.NewReader("typed\n")
	var out strings.Builder
	code, err := attach.Run(second, in, &out)
	if err != nil || code != 4 || !strings.Contains(out.String(), "got:typed") {
		t.Errorf("second client: exit %d, %v, terminal %q; want the container's terminal and exit 4", code, err, out.String())
	}
	select {
	case <-dialled:
		t.Errorf("the driver dialled the socket the container's symlink pointed at (terminal: %q)", shown.String())
	default:
	}
	if strings.Contains(shown.String(), "replaced") {
		t.Logf("the command replaced paths, harmlessly: %q", shown.String())
	}
}

// testExitNotRedirectable: a command running as an unprivileged user
// puts a FIFO (and /dev/zero symlinks) wherever an exit file could be;
// its exit status still arrives, and Wait does not hang (issue 19: a FIFO
// at runc's old exit path hung the nodelet in open()).
func testExitNotRedirectable(t *testing.T, r rt.Runtime, init string) {
	spec, _ := NewSpec(t, init)
	unprivileged(t, init, &spec)
	spec.Workdir = "/"
	var script strings.Builder
	for _, d := range []string{"/.troupe/status", spec.Dir + "/status", spec.Dir + "/private", spec.Dir} {
		fmt.Fprintf(&script, "rm -f %[1]s/exit 2>/dev/null; mkfifo %[1]s/exit 2>/dev/null; mkdir %[1]s/exit.tmp 2>/dev/null; ", d)
	}
	script.WriteString("ln -s /dev/zero /.troupe/status/exit.tmp/x 2>/dev/null; exit 9")
	spec.Args = []string{"sh", "-c", script.String()}
	c := Start(t, r, spec)
	if e := WaitExit(t, c, 20*time.Second); e.Code != 9 {
		t.Errorf("exit = %+v, want code 9", e)
	}
	done := make(chan error, 1)
	go func() { done <- c.Destroy(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("destroy: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("destroy hangs")
	}
}
