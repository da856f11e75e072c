package sched

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

func scrapeMetrics(t *testing.T, h http.Handler) string {
	t.Helper()
	hs := httptest.NewServer(h)
	defer hs.Close()
	resp, err := http.Get(hs.URL)
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

// metricValue is the value of the sample named exactly series (name and
// labels as exposed), or -1 when absent.
func metricValue(body, series string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}

// TestMetrics runs a job through a real controller (placed by the loop,
// RUNNING by a report) and scrapes schedd's metrics: jobs by state and
// partition, nodes, per-node allocation, the queue wait observed once,
// passes and placements, fair share, raft; every name passes promlint.
func TestMetrics(t *testing.T) {
	srv, c := clusterWith(t, Config{})
	ctx := context.Background()
	if _, err := c.Register(ctx, api.NodeRegister{Name: "n1", Addr: "127.0.0.1",
		Capacity: api.Resources{CPUMilli: 4000, Memory: 16 << 30, GPU: 2}, Runtime: "process"}); err != nil {
		t.Fatal(err)
	}
	sp := spec(1, jobspec.ModeSingleNode, 1)
	sp.Resources.GPU = 0.5
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(sp), UID: 1000, GID: 1000, User: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	// A second job that cannot fit stays PENDING.
	res2, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, jobspec.ModeSingleNode, 4)), UID: 1001, GID: 1001, User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, res2.JobID, func(j api.Job) bool { return j.Reason == api.ReasonResources })
	up := api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: j.ID, Host: j.Containers[0].Host, State: api.ContainerRunning}}}
	if err := c.Report(ctx, "n1", up); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, j.ID, func(j api.Job) bool { return j.State == api.JobRunning })
	// The same report again starts nothing.
	if err := c.Report(ctx, "n1", up); err != nil {
		t.Fatal(err)
	}

	body := scrapeMetrics(t, srv.MetricsHandler())
	want := map[string]float64{
		`troupe_schedd_jobs{partition="default",state="RUNNING"}`:     1,
		`troupe_schedd_jobs{partition="default",state="PENDING"}`:     1,
		`troupe_schedd_jobs{partition="default",state="HELD"}`:        0,
		`troupe_schedd_nodes{state="UP"}`:                             1,
		`troupe_schedd_nodes{state="DOWN"}`:                           0,
		`troupe_schedd_node_up{node="n1"}`:                            1,
		`troupe_schedd_node_cpu_allocatable_cores{node="n1"}`:         4,
		`troupe_schedd_node_cpu_allocated_cores{node="n1"}`:           1,
		`troupe_schedd_node_memory_allocatable_bytes{node="n1"}`:      16 << 30,
		`troupe_schedd_node_memory_allocated_bytes{node="n1"}`:        1 << 30,
		`troupe_schedd_node_gpus_allocatable{node="n1"}`:              2,
		`troupe_schedd_node_gpus_allocated{node="n1"}`:                0.5,
		`troupe_schedd_queue_wait_seconds_count{partition="default"}`: 1,
		`troupe_schedd_placements_total`:                              1,
		`troupe_schedd_raft_is_leader`:                                1,
		`troupe_schedd_raft_peers`:                                    1,
		`troupe_schedd_raft_peers_unreachable`:                        0,
		`troupe_schedd_raft_entries_total{kind="submit"}`:             2,
		`troupe_schedd_raft_entries_total{kind="register"}`:           1,
		`troupe_schedd_raft_entries_total{kind="reports"}`:            2, // one after the other: alone
		`troupe_schedd_fairshare_factor{account="",user="bob"}`:       1,
	}
	for series, v := range want {
		if got := metricValue(body, series); got != v {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}
	if n := metricValue(body, "troupe_schedd_scheduling_pass_duration_seconds_count"); n < 1 {
		t.Errorf("scheduling passes observed: %v, want some", n)
	}
	if idx := metricValue(body, "troupe_schedd_raft_applied_index"); idx < float64(srv.raft.AppliedIndex())-100 || idx < 5 {
		t.Errorf("raft applied index %v", idx)
	}
	if v := metricValue(body, "troupe_schedd_raft_schema"); v != state.SchemaVersion {
		t.Errorf("raft schema %v, want %d: a lone server has no older peer to write for", v, state.SchemaVersion)
	}
	if w := metricValue(body, `troupe_schedd_queue_wait_seconds_sum{partition="default"}`); w < 0 || w > 10 {
		t.Errorf("queue wait sum %v s, want the few ms between submit and RUNNING", w)
	}
	if age := metricValue(body, `troupe_schedd_pending_job_age_max_seconds{partition="default",reason="Resources"}`); age < 0 || age > 10 {
		t.Errorf("oldest pending job (Resources) age %v s", age)
	}
	if t.Failed() {
		t.Logf("scraped:\n%s", body)
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// The accounting export's lag is how long ago the oldest ended job this
// server has not yet written to its store ended, 0 once it has; a failed
// pass counts as an export error and lets the lag grow. The data
// directory's file system is reported too.
func TestMetricsAccountingExport(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	srv, c := exportServer(t, t.TempDir(), clock, Config{KeepEnded: time.Hour})
	ctx := context.Background()
	endJobs(t, c, 2)
	clock.Add(90 * time.Second)
	body := scrapeMetrics(t, srv.MetricsHandler())
	if lag := metricValue(body, "troupe_schedd_accounting_export_lag_seconds"); lag != 90 {
		t.Errorf("lag before the export = %v s, want 90", lag)
	}
	if _, err := srv.ExportEnded(ctx); err != nil {
		t.Fatal(err)
	}
	body = scrapeMetrics(t, srv.MetricsHandler())
	if lag := metricValue(body, "troupe_schedd_accounting_export_lag_seconds"); lag != 0 {
		t.Errorf("lag after the export = %v s, want 0", lag)
	}
	if n := metricValue(body, "troupe_schedd_accounting_export_errors_total"); n != 0 {
		t.Errorf("export errors = %v, want 0", n)
	}
	if avail, size := metricValue(body, "troupe_schedd_data_dir_avail_bytes"), metricValue(body, "troupe_schedd_data_dir_size_bytes"); avail <= 0 || size < avail {
		t.Errorf("data dir avail %v bytes of %v", avail, size)
	}
	// The store fails: the next ended job waits, and its wait shows.
	if err := srv.Accounting().Close(); err != nil {
		t.Fatal(err)
	}
	endJobs(t, c, 1)
	clock.Add(10 * time.Minute)
	if _, err := srv.ExportEnded(ctx); err == nil {
		t.Fatal("export to a closed store: no error")
	}
	body = scrapeMetrics(t, srv.MetricsHandler())
	if lag := metricValue(body, "troupe_schedd_accounting_export_lag_seconds"); lag != 600 {
		t.Errorf("lag with the store failing = %v s, want 600", lag)
	}
	if n := metricValue(body, "troupe_schedd_accounting_export_errors_total"); n != 1 {
		t.Errorf("export errors = %v, want 1", n)
	}
	if t.Failed() {
		t.Logf("scraped:\n%s", body)
	}
}
