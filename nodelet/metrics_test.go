package nodelet

import (
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"context"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// TestAgentMetrics scrapes nodelet --metrics-addr while a container
// holding half a fake GPU runs: starts, running containers, what the
// node offers and what is allocated, per GPU; every name passes promlint.
func TestAgentMetrics(t *testing.T) {
	t.Setenv("PATH", filepath.Dir(goBinary(t))+":/usr/sbin:/usr/bin:/sbin:/bin") // no MPS daemon
	s := newTestSchedd(t)
	addr := freeAddr(t)
	startAgentCause(t, s, RuntimeProcess, t.TempDir(), func(c *Config) { c.FakeGPUs = 2; c.MetricsAddr = addr })
	id := s.submit(t, t.TempDir(), func(j *jobspec.Job) {
		j.Resources.GPU = 0.5
		j.Resources.CPU = 0.5
		j.Resources.Memory = 64 << 20
	}, sh("sleep 60"))
	s.waitState(t, id, "main1", api.ContainerRunning)
	bad := s.submit(t, t.TempDir(), func(j *jobspec.Job) { j.Output = "/nonexistent-dir/x.out" }, sh("exit 0"))
	s.waitState(t, bad, "main1", api.ContainerFailed)

	want := []string{
		"troupe_nodelet_container_starts_total 1",
		`troupe_nodelet_container_failures_total{reason="start"} 1`,
		`troupe_nodelet_container_failures_total{reason="oom"} 0`,
		"troupe_nodelet_containers_running 1",
		"troupe_nodelet_cpu_allocatable_cores 2",
		"troupe_nodelet_cpu_allocated_cores 0.5",
		"troupe_nodelet_memory_allocatable_bytes 1.073741824e+09",
		"troupe_nodelet_memory_allocated_bytes 6.7108864e+07",
		"troupe_nodelet_gpus_allocatable 2",
		"troupe_nodelet_gpus_allocated 0.5",
		`troupe_nodelet_gpu_info{gpu="0",name="Fake GPU",uuid="GPU-fake-0000"} 1`,
		`troupe_nodelet_gpu_allocated_ratio{gpu="0"} 0.5`,
		`troupe_nodelet_gpu_allocated_ratio{gpu="1"} 0`,
		`troupe_nodelet_gpu_memory_bytes{gpu="1"} 1.7179869184e+10`,
	}
	var body string
	ok := runtimetest.WaitFor(10*time.Second, func() bool {
		body = scrape(t, addr)
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				return false
			}
		}
		return true
	})
	if !ok {
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				t.Errorf("metrics lack %q", w)
			}
		}
		t.Logf("scraped:\n%s", body)
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if _, err := s.cli.Kill(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	s.waitState(t, id, "main1", api.ContainerKilled)
	if !runtimetest.WaitFor(5*time.Second, func() bool {
		return strings.Contains(scrape(t, addr), "troupe_nodelet_containers_running 0\n")
	}) {
		t.Error("containers_running did not drop to 0")
	}
}

func goBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skip("SKIP: no go binary")
	}
	return p
}
