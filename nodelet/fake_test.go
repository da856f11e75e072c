package nodelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runc"
)

// TestFakeOCIRuntimeNeedsItsKey: oci_runtime = "fake", a benchmark aid
// whose containers never run, is refused, in the config file and as a
// flag, unless benchmark_fake_runtime = true asks for it too; with it
// the runc driver comes up in its fake mode.
func TestFakeOCIRuntimeNeedsItsKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nodelet.hcl")
	_ = os.WriteFile(p, []byte("images = \"/x\"\noci_runtime = \"fake\"\n"), 0o644)
	if _, err := LoadFile(p); !errors.Is(err, ErrFakeRuntime) || !strings.Contains(err.Error(), p+":2: oci_runtime \"fake\"") {
		t.Errorf("LoadFile without benchmark_fake_runtime = %v, want ErrFakeRuntime at line 2", err)
	}
	_ = os.WriteFile(p, []byte("oci_runtime = \"fake\"\nbenchmark_fake_runtime = true\n"), 0o644)
	f, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var c Config
	f.Apply(&c)
	if c.OCIRuntime != OCIFake || !c.BenchmarkFakeRuntime {
		t.Errorf("applied: oci runtime %q, benchmark_fake_runtime %v; want fake, true", c.OCIRuntime, c.BenchmarkFakeRuntime)
	}

	// The flag alone (--oci-runtime fake) is refused as well.
	c = Config{Addr: "http://127.0.0.1:1", Name: "n", StateDir: t.TempDir(), Runtime: RuntimeRunc, OCIRuntime: OCIFake}
	if _, err := c.withDefaults(); !errors.Is(err, ErrFakeRuntime) {
		t.Errorf("withDefaults without BenchmarkFakeRuntime = %v, want ErrFakeRuntime", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := ociRuntime(c, log); !errors.Is(err, ErrFakeRuntime) {
		t.Errorf("ociRuntime without BenchmarkFakeRuntime = %v, want ErrFakeRuntime", err)
	}
	c.BenchmarkFakeRuntime, c.Runtime = true, RuntimeAuto
	if _, err := c.withDefaults(); err == nil || !strings.Contains(err.Error(), "needs runtime runc") {
		t.Errorf("withDefaults with runtime auto = %v, want it to need runtime runc", err)
	}
	c.Runtime, c.RunDir = RuntimeRunc, filepath.Join(c.StateDir, "run")
	r, err := ociRuntime(c, log)
	if err != nil {
		t.Fatal(err)
	}
	if r.OCI() != runc.FakeOCI {
		t.Errorf("OCI() = %q, want %q", r.OCI(), runc.FakeOCI)
	}
}

// TestAgentFakeOCIRuntime: with the fake OCI runtime the agent sets a
// session up as for runc (its containers on the session network, the
// hosts file written), the containers' first output is the time each
// "started", and their states reach schedd through the same reports:
// running, then killed when the job is.
func TestAgentFakeOCIRuntime(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the runc driver (fake OCI runtime) needs root")
	}
	s := newTestSchedd(t)
	cfg, _, _ := startAgentCause(t, s, RuntimeRunc, t.TempDir(), func(c *Config) {
		c.OCIRuntime, c.BenchmarkFakeRuntime = OCIFake, true
	})
	cwd := t.TempDir()
	submitted := time.Now()
	id := s.submit(t, cwd, nil, sh("sleep 600"), nil)
	for _, h := range []string{"main1", "sub1"} {
		s.waitState(t, id, h, api.ContainerRunning)
		out := filepath.Join(cwd, fmt.Sprintf("troupe-%d.%s.out", id, h))
		var raw []byte
		if !eventually.Within(10*time.Second, func() bool { raw, _ = os.ReadFile(out); return len(raw) > 0 }) {
			t.Fatalf("%s printed nothing", h)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
		if at := time.UnixMicro(int64(v * 1e6)); err != nil || at.Before(submitted.Truncate(time.Microsecond)) || at.After(time.Now()) {
			t.Errorf("%s's first output %q: want the wall clock of its start", h, raw)
		}
	}
	j := s.waitJob(t, id, func(j api.Job) bool { return j.State == api.JobRunning })
	for _, c := range j.Containers {
		if c.Addr == "" || c.Addr == cfg.Advertise {
			t.Errorf("%s has address %q, want its own on the session network", c.Host, c.Addr)
		}
	}
	hosts, _ := filepath.Glob(filepath.Join(runDirOf(cfg), "files", "*", "layer", "etc", "hosts"))
	if len(hosts) != 2 {
		t.Errorf("%d hosts files under %s, want one a container", len(hosts), filepath.Join(runDirOf(cfg), "files"))
	}
	for _, p := range hosts {
		if b, _ := os.ReadFile(p); !strings.Contains(string(b), j.Containers[1].Addr+"\tsub1") {
			t.Errorf("%s = %q, want sub1 at %s", p, b, j.Containers[1].Addr)
		}
	}
	if _, err := s.cli.Kill(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	s.waitState(t, id, "main1", api.ContainerKilled)
	s.waitState(t, id, "sub1", api.ContainerKilled)
	assertNothingLeft(t, cfg, RuntimeRunc, s.containerIDs(t, id))
}

// TestUserPeersOnce: a user's peers, which schedd repeats with each of
// their assignments, reach the network once per user, not once per job;
// another list of theirs is added, and each user keeps their own.
func TestUserPeersOnce(t *testing.T) {
	asg := func(uid int, peers ...string) api.Assignment {
		return api.Assignment{Job: api.AssignedJob{UID: uid}, Peers: peers}
	}
	as := api.Assignments{Assignments: []api.Assignment{
		asg(1000, "10.1.0.2", "10.1.0.3"), asg(1001, "10.2.0.9"), asg(1000, "10.1.0.2", "10.1.0.3"),
		asg(1000, "10.1.0.2", "10.1.0.3"), asg(1000, "10.1.0.4"), asg(1002),
	}}
	got := userPeers(as)
	want := map[int][]string{1000: {"10.1.0.2", "10.1.0.3", "10.1.0.4"}, 1001: {"10.2.0.9"}, 1002: nil}
	if !maps.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("userPeers = %v, want %v", got, want)
	}
	if first := as.Assignments[0].Peers; len(first) != 2 || cap(first) != 2 {
		t.Errorf("the first assignment's peers changed to %v (cap %d)", first, cap(first))
	}
}
