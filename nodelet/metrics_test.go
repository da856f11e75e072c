package nodelet

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"context"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/freeport"
	"github.com/troupe-hpc/troupe/jobspec"
)

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

// sample is one sample a scrape must hold: its family's type, labels
// and value.
type sample struct {
	name   string
	typ    dto.MetricType
	labels map[string]string
	value  float64
}

// parseMetrics reads a scrape with Prometheus' own parser.
func parseMetrics(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("Prometheus' parser: %v\n%s", err, body)
	}
	return mfs
}

// find is s's value in mfs, and why not when it is not there.
func (s sample) find(mfs map[string]*dto.MetricFamily) (float64, string) {
	mf := mfs[s.name]
	if mf == nil {
		return 0, "missing"
	}
	if mf.GetType() != s.typ {
		return 0, fmt.Sprintf("a %v, want a %v", mf.GetType(), s.typ)
	}
next:
	for _, m := range mf.Metric {
		if len(m.Label) != len(s.labels) {
			continue
		}
		for _, l := range m.Label {
			if s.labels[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		if s.typ == dto.MetricType_COUNTER {
			return m.GetCounter().GetValue(), ""
		}
		return m.GetGauge().GetValue(), ""
	}
	return 0, fmt.Sprintf("no sample labelled %v", s.labels)
}

// TestAgentMetrics scrapes nodelet --metrics-addr while a container
// holding half a fake GPU runs, after one container failed to start and
// one exited with code 3: Prometheus' parser reads it, and it holds every
// troupe_nodelet_* family with its type and values (starts, failures by
// reason, running containers, what the node offers and what is
// allocated, per GPU) and the go_* and process_* series; every name
// passes promlint.
func TestAgentMetrics(t *testing.T) {
	t.Setenv("PATH", filepath.Dir(goBinary(t))+":/usr/sbin:/usr/bin:/sbin:/bin") // no MPS daemon
	s := newTestSchedd(t)
	addr := freeport.Addr(t)
	startAgentCause(t, s, RuntimeProcess, t.TempDir(), func(c *Config) { c.FakeGPUs = 2; c.MetricsAddr = addr })
	id := s.submit(t, t.TempDir(), func(j *jobspec.Job) {
		j.Resources.GPU = 0.5
		j.Resources.CPU = 0.5
		j.Resources.Memory = 64 << 20
	}, sh("sleep 60"))
	s.waitState(t, id, "main1", api.ContainerRunning)
	bad := s.submit(t, t.TempDir(), func(j *jobspec.Job) { j.Output = "/dev/null/x.out" }, sh("exit 0"))
	s.waitState(t, bad, "main1", api.ContainerFailed)
	exit3 := s.submit(t, t.TempDir(), nil, sh("exit 3"))
	s.waitState(t, exit3, "main1", api.ContainerExited)

	counter, gauge := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	gpu := func(i string) map[string]string { return map[string]string{"gpu": i} }
	want := []sample{
		{"troupe_nodelet_container_starts_total", counter, nil, 2},
		{"troupe_nodelet_container_failures_total", counter, map[string]string{"reason": "start"}, 1},
		{"troupe_nodelet_container_failures_total", counter, map[string]string{"reason": "oom"}, 0},
		{"troupe_nodelet_container_failures_total", counter, map[string]string{"reason": "exit"}, 1},
		{"troupe_nodelet_containers_running", gauge, nil, 1},
		{"troupe_nodelet_cpu_allocatable_cores", gauge, nil, 2},
		{"troupe_nodelet_cpu_allocated_cores", gauge, nil, 0.5},
		{"troupe_nodelet_memory_allocatable_bytes", gauge, nil, 1 << 30},
		{"troupe_nodelet_memory_allocated_bytes", gauge, nil, 64 << 20},
		{"troupe_nodelet_gpus_allocatable", gauge, nil, 2},
		{"troupe_nodelet_gpus_allocated", gauge, nil, 0.5},
		{"troupe_nodelet_gpu_info", gauge, map[string]string{"gpu": "0", "name": "Fake GPU", "uuid": "GPU-fake-0000"}, 1},
		{"troupe_nodelet_gpu_info", gauge, map[string]string{"gpu": "1", "name": "Fake GPU", "uuid": "GPU-fake-0001"}, 1},
		{"troupe_nodelet_gpu_allocated_ratio", gauge, gpu("0"), 0.5},
		{"troupe_nodelet_gpu_allocated_ratio", gauge, gpu("1"), 0},
		{"troupe_nodelet_gpu_memory_bytes", gauge, gpu("0"), 16 << 30},
		{"troupe_nodelet_gpu_memory_bytes", gauge, gpu("1"), 16 << 30},
	}
	var body string
	var mfs map[string]*dto.MetricFamily
	ok := eventually.Within(10*time.Second, func() bool {
		body = scrape(t, addr)
		mfs = parseMetrics(t, body)
		for _, w := range want {
			if v, why := w.find(mfs); why != "" || v != w.value {
				return false
			}
		}
		return true
	})
	if !ok {
		for _, w := range want {
			if v, why := w.find(mfs); why != "" {
				t.Errorf("%s%v: %s", w.name, w.labels, why)
			} else if v != w.value {
				t.Errorf("%s%v = %v, want %v", w.name, w.labels, v, w.value)
			}
		}
		t.Logf("scraped:\n%s", body)
	}
	avail, _ := (sample{"troupe_nodelet_state_dir_avail_bytes", gauge, nil, 0}).find(mfs)
	size, _ := (sample{"troupe_nodelet_state_dir_size_bytes", gauge, nil, 0}).find(mfs)
	if avail <= 0 || size < avail {
		t.Errorf("state dir: %v bytes available of %v", avail, size)
	}
	// The families an earlier nodelet had from the Go client's
	// collectors, and the help texts the man page's users know.
	for _, n := range []string{"go_goroutines", "go_threads", "go_info", "go_gc_duration_seconds",
		"go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes", "process_cpu_seconds_total",
		"process_resident_memory_bytes", "process_virtual_memory_bytes", "process_open_fds",
		"process_max_fds", "process_start_time_seconds"} {
		if mfs[n] == nil {
			t.Errorf("metrics lack %s", n)
		}
	}
	if mf := mfs["process_start_time_seconds"]; mf != nil {
		if st := mf.Metric[0].GetGauge().GetValue(); st > float64(time.Now().Unix()+1) || st < float64(time.Now().Add(-time.Hour).Unix()) {
			t.Errorf("process_start_time_seconds = %v: not this process", st)
		}
	}
	if h := mfs["troupe_nodelet_container_failures_total"].GetHelp(); h != "Containers that failed, by reason: start (could not be started), oom (out of memory), exit (non-zero exit code)." {
		t.Errorf("failures' help = %q", h)
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if _, err := s.cli.Kill(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	s.waitState(t, id, "main1", api.ContainerKilled)
	if !eventually.Within(5*time.Second, func() bool {
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

// When schedd stops answering heartbeats, the lease runs out, the fence
// kills the running container and the nodelet reports it so: the
// metrics count one lease lapse and one fence kill, and show the lease
// run out; once schedd answers again the lease has time left and the
// counts stay.
func TestAgentMetricsLeaseAndFence(t *testing.T) {
	needRunc(t)
	f := newFakeSchedd()
	f.lease = api.NodeLease{Lease: time.Second, Heartbeat: 100 * time.Millisecond, NodeTimeout: 2 * time.Second}
	addr := freeport.Addr(t)
	const id = 1
	f.assign(fakeJob(t, id, t.TempDir(), nil, sh("exec sleep 600")))
	startFakeAgent(t, f, RuntimeRunc, t.TempDir(), func(c *Config) { c.Network, c.MetricsAddr = NetworkHost, addr })
	f.waitState(t, id, "main1", api.ContainerRunning)
	body := scrape(t, addr)
	mfs := parseMetrics(t, body)
	for _, w := range []sample{
		{"troupe_nodelet_lease_lapses_total", dto.MetricType_COUNTER, nil, 0},
		{"troupe_nodelet_fence_kills_total", dto.MetricType_COUNTER, nil, 0},
	} {
		if v, why := w.find(mfs); why != "" || v != w.value {
			t.Errorf("before the lapse: %s = %v %s, want %v", w.name, v, why, w.value)
		}
	}
	if v, why := (sample{"troupe_nodelet_lease_remaining_seconds", dto.MetricType_GAUGE, nil, 0}).find(mfs); why != "" || v <= 0 || v > 1 {
		t.Errorf("lease remaining %v %s, want within (0, 1]", v, why)
	}
	f.mu.Lock()
	f.silent = true
	f.mu.Unlock()
	u := f.waitState(t, id, "main1", api.ContainerFailed)
	if !strings.Contains(u.Message, "fence") {
		t.Fatalf("container ended %s %q, want killed by the fence", u.State, u.Message)
	}
	mfs = parseMetrics(t, scrape(t, addr))
	for _, w := range []sample{
		{"troupe_nodelet_lease_lapses_total", dto.MetricType_COUNTER, nil, 1},
		{"troupe_nodelet_fence_kills_total", dto.MetricType_COUNTER, nil, 1},
	} {
		if v, why := w.find(mfs); why != "" || v != w.value {
			t.Errorf("after the lapse: %s = %v %s, want %v", w.name, v, why, w.value)
		}
	}
	if v, _ := (sample{"troupe_nodelet_lease_remaining_seconds", dto.MetricType_GAUGE, nil, 0}).find(mfs); v >= 0 {
		t.Errorf("lease remaining %v after the lapse, want negative", v)
	}
	f.mu.Lock()
	f.silent = false
	f.mu.Unlock()
	if !eventually.Within(10*time.Second, func() bool {
		v, _ := (sample{"troupe_nodelet_lease_remaining_seconds", dto.MetricType_GAUGE, nil, 0}).find(parseMetrics(t, scrape(t, addr)))
		return v > 0
	}) {
		t.Fatal("lease not renewed in 10s after schedd answered again")
	}
	if v, _ := (sample{"troupe_nodelet_lease_lapses_total", dto.MetricType_COUNTER, nil, 0}).find(parseMetrics(t, scrape(t, addr))); v != 1 {
		t.Errorf("lapses after the renewal = %v, want 1", v)
	}
}
