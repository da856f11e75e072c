package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"time"

	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/nodelet"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

func TestMemoryFlag(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"8GiB", 8 << 30, true},
		{"512MiB", 512 << 20, true},
		{"1.5G", 3 << 29, true}, // 1.5 GiB: "G" is 1024³ everywhere, as in a job file
		{"16G", 16 << 30, true},
		{"16GB", 16_000_000_000, true},
		{"1073741824", 1 << 30, true},
		{"2 gib", 2 << 30, true},
		{"-1G", 0, false},
		{"8XB", 0, false},
		{"GiB", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			cfg := nodelet.Config{Runtime: nodelet.RuntimeAuto, Network: nodelet.NetworkAuto}
			err := checkFlags(&cfg, tc.in)
			got := cfg.Memory
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("--memory %q = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
			}
			// A job file reads the same size as the same number of bytes,
			// so a node offering "16G" fits a job asking for "16G".
			if tc.ok {
				if n, err := jobspec.ParseMemory(tc.in); err != nil || n != got {
					t.Errorf("jobspec.ParseMemory(%q) = %d, %v; the node read %d", tc.in, n, err, got)
				}
			}
		})
	}
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"UnknownFlag", []string{"--bogus"}, "flag provided but not defined: -bogus"},
		{"BadRuntime", []string{"--runtime", "crun"}, `--runtime "crun": want auto, runc, apptainer or process`},
		{"BadOCIRuntime", []string{"--oci-runtime", "youki"}, `--oci-runtime "youki": want auto, crun, libcontainer or runc`},
		{"BadMemory", []string{"--memory", "lots"}, "--memory"},
		{"NegativeCPU", []string{"--cpu", "-2"}, "--cpu -2"},
		{"BadGrace", []string{"--stop-grace", "soon"}, "invalid value"},
		{"StrayArg", []string{"extra"}, `unexpected argument "extra"`},
		{"MissingInit", []string{"--addr", "127.0.0.1:1", "--init", "/nonexistent/troupe-init", "--state-dir", os.TempDir()}, "troupe-init not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, &stderr); code != 1 {
				t.Errorf("exit = %d, want 1", code)
			}
			out := stderr.String()
			if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "nodelet: ") || !strings.Contains(out, tc.want) {
				t.Errorf("stderr = %q, want one line containing %q", out, tc.want)
			}
		})
	}
}

// TestMain lets the test binary act as the nodelet (helper pattern).
func TestMain(m *testing.M) {
	if os.Getenv("NODELET_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// syncBuffer is a process's output read while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSIGTERMStopsWhileRegistering: a nodelet whose schedd is away
// still exits 0 promptly on SIGTERM.
func TestSIGTERMStopsWhileRegistering(t *testing.T) {
	init := os.Args[0] // any executable file will do as --init here
	cmd := exec.Command(os.Args[0], "--addr", "127.0.0.1:1", "--runtime", "process",
		"--init", init, "--fence", runtimetest.BuildCmd(t, "troupe-fence"), "--state-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "NODELET_TEST_MAIN=1")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupted while it retries registering, the case under test.
	eventually.True(t, 10*time.Second, "the nodelet failing to register", func() bool { return strings.Contains(stderr.String(), "register failed") })
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("nodelet ignored SIGINT")
	}
	if !strings.Contains(stderr.String(), "register failed") {
		t.Errorf("log does not mention the failed registration:\n%s", stderr.String())
	}
}

// TestExplicitCrunFailsAtStartup: --oci-runtime crun with a crun that
// runs no container (a stand-in that fails as crun 1.8 does on a mixed
// cgroup v1/v2 node) stops the nodelet at start, naming the cause.
func TestExplicitCrunFailsAtStartup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the runc driver needs root (euid 0)")
	}
	dir := t.TempDir()
	crun := filepath.Join(dir, "crun")
	if err := os.WriteFile(crun, []byte("#!/bin/sh\necho 'cgroups in hybrid mode not supported' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	exe := os.Args[0] // any executable file will do as the tools here
	var stderr bytes.Buffer
	code := run([]string{"--addr", "127.0.0.1:1", "--runtime", "runc", "--oci-runtime", "crun",
		"--init", exe, "--fence", exe, "--ssh", exe, "--network", "host", "--state-dir", t.TempDir()}, &stderr)
	if code != 1 {
		t.Errorf("exit = %d, want 1", code)
	}
	out := stderr.String()
	want := "nodelet: --oci-runtime crun: " + crun + " does not work here: trial container: exit status 1: cgroups in hybrid mode not supported"
	if !strings.Contains(out, want) {
		t.Errorf("stderr = %q, want it to contain %q", out, want)
	}
}

// TestLinksNoReflectiveDecoding: nodelet.hcl and the image catalog are
// read through internal/hclattr, not gohcl, whose hclwrite import links
// go-cmp: package initialisers every container's init (this binary,
// re-executed as `nodelet init`) would pay for at its every start.
func TestLinksNoReflectiveDecoding(t *testing.T) {
	for _, p := range linked(t) {
		switch p {
		case "github.com/hashicorp/hcl/v2/gohcl", "github.com/hashicorp/hcl/v2/hclwrite", "github.com/google/go-cmp/cmp":
			t.Errorf("the nodelet links %s", p)
		}
	}
}

// TestLinksNoPrometheusClient: the nodelet writes its /metrics by hand
// (internal/promtext), not with Prometheus' Go client, whose package
// initialisers (its default registry with the Go and process
// collectors, procfs, expvar) every container's init would pay for at
// its every start.
func TestLinksNoPrometheusClient(t *testing.T) {
	for _, p := range linked(t) {
		if strings.HasPrefix(p, "github.com/prometheus/") || p == "expvar" {
			t.Errorf("the nodelet links %s", p)
		}
	}
}

// TestBuildLeavesOutCRIU: make build and the end-to-end tests' build
// give the nodelet the runc_nocriu tag, so that libcontainer's
// checkpoint/restore (go-criu, and with it protobuf) is not linked: its
// package initialisers and a quarter of the binary are what every
// container's init would otherwise pay for at its start. troupe never
// checkpoints a container.
func TestBuildLeavesOutCRIU(t *testing.T) {
	for _, f := range []struct{ file, within, line string }{
		{"../../Makefile", "", "NODELET_TAGS ?="},
		{"../../e2e/cluster_test.go", "func nodeletTags(", "return \""}, // its answers
	} {
		b, err := os.ReadFile(f.file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if f.within != "" { // that function's body only
			_, body, ok := strings.Cut(text, f.within)
			if !ok {
				t.Fatalf("%s: no %q", f.file, f.within)
			}
			text, _, _ = strings.Cut(body, "\n}\n")
		}
		found := false
		for l := range strings.Lines(text) {
			if strings.Contains(l, f.line) {
				found = true
				if !strings.Contains(l, "runc_nocriu") {
					t.Errorf("%s: %s: no runc_nocriu tag", f.file, strings.TrimSpace(l))
				}
			}
		}
		if !found {
			t.Errorf("%s: no line with %q", f.file, f.line)
		}
	}
	for _, p := range linked(t, "runc_nocriu") {
		if strings.HasPrefix(p, "github.com/checkpoint-restore/") || strings.HasPrefix(p, "google.golang.org/protobuf/") {
			t.Errorf("the nodelet built with runc_nocriu links %s", p)
		}
	}
}

// linked is the packages the nodelet binary links (go list -deps) when
// built with tags; it skips loudly without a go binary.
func linked(t *testing.T, tags ...string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("SKIP: no go binary to list the nodelet's packages with")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-tags", strings.Join(tags, ","), ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	return strings.Fields(string(out))
}
