package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
)

// bin holds the binaries TestMain builds from this tree.
var bin string

// TestMain builds the binaries into a temporary directory, or, when
// TROUPE_E2E_BIN names a directory, uses the prebuilt ones there (as
// `make build` leaves them in bin/): a test binary built with
// `go test -c ./e2e` then runs on a machine without Go.
func TestMain(m *testing.M) {
	if dir := os.Getenv("TROUPE_E2E_BIN"); dir != "" {
		abs, err := filepath.Abs(dir)
		if err == nil {
			_, err = os.Stat(filepath.Join(abs, "schedd"))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "TROUPE_E2E_BIN:", err)
			os.Exit(1)
		}
		bin = abs
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "troupe-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	cmd := exec.Command("go", "build", "-o", dir+"/", "../cmd/bsub", "../cmd/bqueue", "../cmd/bkill",
		"../cmd/bjob", "../cmd/bpeek", "../cmd/battach", "../cmd/bapp", "../cmd/bhist", "../cmd/bhold", "../cmd/brelease", "../cmd/bhosts", "../cmd/badmin", "../cmd/brsvs", "../cmd/bjobs", "../cmd/bstop", "../cmd/bresume", "../cmd/schedd", "../cmd/troupe-init", "../cmd/troupe-ssh", "../cmd/troupe-fence", "../cmd/troupe-slurm")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building troupe:", err)
		os.Exit(1)
	}
	// The nodelet as make build builds it: with cgo and, where
	// libseccomp's headers are, the seccomp tag, so that it can run
	// containers in-process (--oci-runtime libcontainer).
	cmd = exec.Command("go", "build", "-tags", nodeletTags(), "-o", dir+"/", "../cmd/nodelet")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building nodelet:", err)
		os.Exit(1)
	}
	if err := rewriteBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, "rewriting the binaries:", err)
		os.Exit(1)
	}
	_ = os.Chmod(dir, 0o755) // tests run bsub as other users too
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// rewriteBinaries replaces each file in dir by the same bytes written in
// one write(2), as the Makefile's build rewrites its outputs (REWRITE):
// the Go linker writes through a memory map, which leaves the file in the
// page cache in small pages, and every process started from it then costs
// more CPU (about 1 ms a bsub on the development machine) until they are
// evicted. Installed binaries are cached in large folios; the benchmarks
// measure those.
func rewriteBinaries(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path+".tmp", b, info.Mode().Perm()); err != nil {
			return err
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			return err
		}
	}
	return nil
}

// nodeletTags is the Makefile's NODELET_TAGS: seccomp where pkg-config
// finds libseccomp, and runc_nocriu.
func nodeletTags() string {
	if exec.Command("pkg-config", "--exists", "libseccomp").Run() == nil {
		return "seccomp runc_nocriu"
	}
	return "runc_nocriu"
}

// needBusybox skips t without busybox (the jobs' nc).
func needBusybox(t testing.TB) {
	if _, err := exec.LookPath("busybox"); err != nil {
		t.Skip("SKIP: needs busybox (busybox-static; `make deps` installs it)")
	}
}

func needRunc(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: end-to-end runc tests need root (run `sudo make test`)")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("SKIP: end-to-end runc tests need runc (`make deps` installs it)")
	}
}

// devCluster is `schedd --dev` with its nodelets.
type devCluster struct {
	t    testing.TB
	dir  string
	addr string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan struct{}
}

// startCluster starts `schedd --dev` with nodes runc nodelets of cpu
// CPUs each; extra are more schedd flags.
func startCluster(t testing.TB, nodes int, cpu string, extra ...string) *devCluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "troupe-e2e")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755) // the socket is there, for every user
	c := &devCluster{t: t, dir: dir, log: &bytes.Buffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(bin+"/schedd", append([]string{"--dev", "--data-dir", dir, "--nodes", strconv.Itoa(nodes),
		"--node-cpu", cpu, "--node-memory", "4GiB", "--runtime", "runc", "--stop-grace", "2s"}, extra...)...)
	c.cmd.Stderr = c.log
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := scanAddr(out)
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	select {
	case c.addr = <-addr:
	case <-c.done:
		t.Fatalf("schedd --dev exited:\n%s", c.log)
	case <-time.After(60 * time.Second):
		t.Fatalf("schedd --dev did not print TROUPE_ADDR in 60s:\n%s", c.log)
	}
	t.Cleanup(c.stop)
	return c
}

// scanAddr reads schedd's standard output and sends the TROUPE_ADDR it
// prints; it reads on to the end so schedd never blocks on a full pipe.
func scanAddr(out io.Reader) <-chan string {
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "export TROUPE_ADDR="); ok {
				addr <- v
			}
		}
	}()
	return addr
}

// stop sends SIGTERM, as Ctrl-C would, and checks nothing is left behind.
func (c *devCluster) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		_ = c.cmd.Process.Kill()
		c.t.Errorf("schedd --dev did not stop within 60s of SIGTERM:\n%s", c.log)
	}
	if left := leftovers(c.dir, true); left != "" {
		c.t.Errorf("left behind after the cluster stopped:\n%s", left)
	}
	if c.t.Failed() {
		c.t.Logf("schedd log:\n%s", c.log)
	}
	os.RemoveAll(c.dir)
}

// leftovers lists the runc containers and mounts of the cluster in dir,
// and with procs its processes (the daemons' command lines name dir).
// Without procs the cluster is still up, so the namespaces each nodelet
// keeps prepared for the next containers (netns-pool/.pool-N) are not
// leftovers; a stopped cluster must have removed them too.
func leftovers(dir string, procs bool) string {
	var b strings.Builder
	if procs {
		out, _ := exec.Command("pgrep", "-a", "-f", dir).Output()
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l != "" {
				fmt.Fprintf(&b, "process: %s\n", l)
			}
		}
	}
	var roots []string
	for _, pat := range []string{"runc", "libcontainer", "run/runc", "run/libcontainer"} {
		m, _ := filepath.Glob(filepath.Join(dir, "nodes", "*", pat))
		roots = append(roots, m...)
	}
	for _, r := range roots {
		out, _ := exec.Command("runc", "--root", r, "list", "-q").Output()
		if s := strings.TrimSpace(string(out)); s != "" {
			fmt.Fprintf(&b, "runc containers in %s: %s\n", r, s)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mounts), "\n") {
		if strings.Contains(l, dir) && (procs || !strings.Contains(l, "/netns-pool/.pool-")) {
			fmt.Fprintf(&b, "mount: %s\n", l)
		}
	}
	return b.String()
}

// run runs a troupe command against the cluster in dir.
func (c *devCluster) run(dir string, name string, args ...string) (string, string, int) {
	c.t.Helper()
	return c.runCred(nil, dir, name, args...)
}

// runAs is run as uid (and gid uid): a user other than the one who
// started the cluster.
func (c *devCluster) runAs(uid uint32, dir, name string, args ...string) (string, string, int) {
	c.t.Helper()
	return c.runCred(&syscall.Credential{Uid: uid, Gid: uid}, dir, name, args...)
}

func (c *devCluster) runCred(cred *syscall.Credential, dir string, name string, args ...string) (string, string, int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin+"/"+name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TROUPE_ADDR="+c.addr)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			c.t.Fatalf("%s %v: %v", name, args, err)
		}
		code = ee.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

var submitted = regexp.MustCompile(`^Job <(\d+)> is submitted to partition <(\w+)>\.`)

// submit writes a job file into dir, submits it and returns the job id.
func (c *devCluster) submit(dir, name, hcl string, flags ...string) (uint64, int) {
	c.t.Helper()
	path := filepath.Join(dir, name+".hcl")
	if err := os.WriteFile(path, []byte(hcl), 0o644); err != nil {
		c.t.Fatal(err)
	}
	out, errOut, code := c.run(dir, "bsub", append(flags, path)...)
	m := submitted.FindStringSubmatch(out)
	if m == nil {
		c.t.Fatalf("bsub %s: exit %d, stdout %q, stderr %q", name, code, out, errOut)
	}
	id, _ := strconv.ParseUint(m[1], 10, 64)
	return id, code
}

func (c *devCluster) job(id uint64) api.Job {
	c.t.Helper()
	out, errOut, code := c.run(c.dir, "bjob", "-o", "json", strconv.FormatUint(id, 10))
	var j api.Job
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil {
		c.t.Fatalf("bjob %d: exit %d: %s%s", id, code, out, errOut)
	}
	return j
}

func (c *devCluster) waitState(id uint64, timeout time.Duration, ok func(api.Job) bool) api.Job {
	c.t.Helper()
	var j api.Job
	eventually.NoError(c.t, timeout, fmt.Sprintf("job %d's state", id), func() error {
		if j = c.job(id); ok(j) {
			return nil
		}
		return fmt.Errorf("still %s (%s): %+v", j.State, j.Reason, j.Containers)
	})
	return j
}
