// Package contrib holds files shipped beside troupe; this test checks the
// Grafana dashboard and Prometheus rules against the metrics the daemons
// export, and the rules with promtool.
package contrib

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	yaml "go.yaml.in/yaml/v2"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched"
)

// registered are the troupe_* metric families the code of schedd and the
// nodelet registers: the names given to Prometheus' client (a *Opts
// literal's Name, prometheus.NewDesc's first argument) and to the
// nodelet's text writer (Counter, Gauge, Family), read from the source.
func registered(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	lit := func(e ast.Expr) {
		if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
			if s, err := strconv.Unquote(b.Value); err == nil && strings.HasPrefix(s, "troupe_") {
				names[s] = true
			}
		}
	}
	fset := token.NewFileSet()
	for _, root := range []string{"../sched", "../nodelet"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					if sel, ok := n.Type.(*ast.SelectorExpr); ok && strings.HasSuffix(sel.Sel.Name, "Opts") {
						for _, e := range n.Elts {
							if kv, ok := e.(*ast.KeyValueExpr); ok {
								if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
									lit(kv.Value)
								}
							}
						}
					}
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && len(n.Args) > 0 &&
						slices.Contains([]string{"NewDesc", "Counter", "Gauge", "Family"}, sel.Sel.Name) {
						lit(n.Args[0])
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(names) < 40 {
		t.Fatalf("found only %d metric names registered in sched/ and nodelet/: %v", len(names), names)
	}
	return names
}

// scraped are the troupe_* families a real schedd serves at /metrics
// once it has a node, a job that ran and ended, and one pending.
func scraped(t *testing.T) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sched.Open(ctx, sched.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); <-done; srv.Close() })
	c, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(ctx, api.NodeRegister{Name: "n1", Addr: "127.0.0.1",
		Capacity: api.Resources{CPUMilli: 2000, Memory: 4 << 30}, Runtime: "process"}); err != nil {
		t.Fatal(err)
	}
	job := func(cpu float64) jobspec.Job {
		return jobspec.Job{Name: "m", Image: "host", Command: []string{"true"},
			Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode}, Resources: jobspec.Resources{CPU: cpu, Memory: 32 << 20}}
	}
	wait := func(id uint64, ok func(api.Job) bool) api.Job {
		t.Helper()
		var j api.Job
		eventually.NoError(t, 10*time.Second, fmt.Sprintf("job %d's state", id), func() error {
			var err error
			if j, _, err = c.Job(ctx, id, 0, 0); err == nil && ok(j) {
				return nil
			}
			return fmt.Errorf("%+v, %v", j, err)
		})
		return j
	}
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(job(1)), UID: 1000, GID: 1000, User: "ada", Cwd: "/"})
	if err != nil {
		t.Fatal(err)
	}
	j := wait(res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	for _, st := range []api.ContainerState{api.ContainerPreparing, api.ContainerRunning, api.ContainerExited} {
		if err := c.Report(ctx, "n1", api.ContainerReport{Updates: []api.ContainerUpdate{{JobID: j.ID, Host: j.Containers[0].Host, State: st}}}); err != nil {
			t.Fatal(err)
		}
	}
	wait(j.ID, func(j api.Job) bool { return j.State.Terminal() })
	// The node taken whole by a job that never starts (no report), then
	// one that must wait for it: PENDING for Resources while scraped.
	full, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(job(2)), UID: 1001, GID: 1001, User: "bob", Cwd: "/"})
	if err != nil {
		t.Fatal(err)
	}
	wait(full.JobID, func(j api.Job) bool { return j.State == api.JobScheduled })
	waiting, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(job(1)), UID: 1001, GID: 1001, User: "bob", Cwd: "/"})
	if err != nil {
		t.Fatal(err)
	}
	wait(waiting.JobID, func(j api.Job) bool { return j.Reason == api.ReasonResources })
	rec := httptest.NewRecorder()
	srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("schedd's /metrics: %v", err)
	}
	names := map[string]bool{}
	for n := range mfs {
		if strings.HasPrefix(n, "troupe_") {
			names[n] = true
		}
	}
	return names
}

// known is what the daemons export: every family a real schedd served
// must be among those the code registers (else the reading of the code
// misses some), and the union is what rules and panels may use.
func known(t *testing.T) map[string]bool {
	t.Helper()
	reg, got := registered(t), scraped(t)
	for n := range got {
		if !reg[n] {
			t.Errorf("schedd serves %s, which the reading of sched/ did not find", n)
		}
	}
	// What a schedd with a node and ended and pending jobs must serve.
	for _, n := range []string{"troupe_schedd_jobs", "troupe_schedd_node_up", "troupe_schedd_raft_is_leader",
		"troupe_schedd_accounting_export_lag_seconds", "troupe_schedd_data_dir_avail_bytes", "troupe_job_stage_seconds",
		"troupe_schedd_pending_job_age_max_seconds", "troupe_schedd_queue_wait_seconds"} {
		if !got[n] {
			t.Errorf("schedd's /metrics lacks %s", n)
		}
	}
	for n := range got {
		reg[n] = true
	}
	return reg
}

var metricRef = regexp.MustCompile(`\btroupe_[a-z0-9_]+`)

// unknownMetrics lists the troupe_* names expr uses that no daemon
// exports (a histogram's _bucket, _sum and _count count as its own).
func unknownMetrics(expr string, known map[string]bool) (used, unknown []string) {
	for _, n := range metricRef.FindAllString(expr, -1) {
		used = append(used, n)
		base := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suf); ok && known[b] {
				base = b
			}
		}
		if !known[base] {
			unknown = append(unknown, n)
		}
	}
	return used, unknown
}

func TestGrafanaDashboard(t *testing.T) {
	known := known(t)
	b, err := os.ReadFile("grafana/troupe.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("troupe.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard lacks a title, uid or panels")
	}
	ids, usedAll, rows := map[int]bool{}, map[string]bool{}, map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			rows[p.Title] = true
			continue
		}
		if p.Title == "" || p.Type == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d (%q) lacks a title, type or targets", p.ID, p.Title)
		}
		for _, tg := range p.Targets {
			used, unknown := unknownMetrics(tg.Expr, known)
			if len(used) == 0 {
				t.Errorf("panel %q target %s uses no troupe metric: %s", p.Title, tg.RefID, tg.Expr)
			}
			for _, u := range unknown {
				t.Errorf("panel %q uses %s, which no daemon exports", p.Title, u)
			}
			if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") {
				t.Errorf("panel %q: unbalanced parentheses in %s", p.Title, tg.Expr)
			}
			for _, u := range used {
				usedAll[u] = true
			}
		}
	}
	for _, r := range []string{"Queue", "Nodes", "Job stages", "Raft", "Accounting export", "Leases and fence", "Disk"} {
		if !rows[r] {
			t.Errorf("no row %q", r)
		}
	}
	for _, w := range []string{"troupe_schedd_jobs", "troupe_schedd_queue_wait_seconds_bucket",
		"troupe_schedd_scheduling_pass_duration_seconds_bucket", "troupe_schedd_placements_total",
		"troupe_schedd_node_cpu_allocated_cores", "troupe_nodelet_gpu_allocated_ratio",
		"troupe_nodelet_container_failures_total", "troupe_job_stage_seconds_bucket",
		"troupe_schedd_raft_is_leader", "troupe_schedd_raft_peers_unreachable",
		"troupe_schedd_accounting_export_lag_seconds", "troupe_nodelet_lease_remaining_seconds",
		"troupe_nodelet_fence_kills_total", "troupe_schedd_data_dir_avail_bytes"} {
		if !usedAll[w] {
			t.Errorf("no panel shows %s", w)
		}
	}
}

const rulesFile = "prometheus/troupe-rules.yml"

func TestPrometheusRules(t *testing.T) {
	known := known(t)
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Record      string            `yaml:"record"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("troupe-rules.yml: %v", err)
	}
	alerts := map[string]bool{}
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q lacks a name or rules", g.Name)
		}
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" {
				t.Errorf("group %s: a rule lacks alert or expr: %+v", g.Name, r)
				continue
			}
			if alerts[r.Alert] {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			alerts[r.Alert] = true
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a severity label, a summary or a description", r.Alert)
			}
			used, unknown := unknownMetrics(r.Expr, known)
			if len(used) == 0 {
				t.Errorf("alert %s uses no troupe metric: %s", r.Alert, r.Expr)
			}
			for _, u := range unknown {
				t.Errorf("alert %s uses %s, which no daemon exports", r.Alert, u)
			}
		}
	}
	for _, w := range []string{"TroupeNoLeader", "TroupeSchedulerPeerDown", "TroupeNodeDown", "TroupeLeaseLapsed",
		"TroupeFenceKills", "TroupeAccountingExportLag", "TroupeDataDirFilling", "TroupeDataDirAlmostFull",
		"TroupeStateDirFilling", "TroupeSchedulingPassSlow", "TroupeContainerFailures", "TroupeOOMKills"} {
		if !alerts[w] {
			t.Errorf("alert %s missing", w)
		}
	}
}

// TestPromtool checks the rules with Prometheus' own tool: their syntax
// and PromQL (promtool check rules), and that each alert fires on the
// series of troupe-rules.test.yml and stays quiet where it should
// (promtool test rules). The dashboard's queries are checked as
// recording rules, Grafana's $__rate_interval made 5m.
func TestPromtool(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("SKIPPED: promtool not found: the alerting rules and the dashboard's queries are not checked by " +
			"Prometheus' tool (Debian package prometheus; contrib/dev/install-deps installs it)")
	}
	abs, err := filepath.Abs("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	panels := filepath.Join(t.TempDir(), "panels.yml")
	if err := os.WriteFile(panels, dashboardRules(t), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "troupe-rules.yml"}, {"test", "rules", "troupe-rules.test.yml"},
		{"check", "rules", panels}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = abs
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// dashboardRules is a rule file with one recording rule per query of the
// dashboard.
func dashboardRules(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("grafana/troupe.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			ID      int `json:"id"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			rules = append(rules, rule{Record: fmt.Sprintf("panel_%d_%s", p.ID, tg.RefID),
				Expr: strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m")})
		}
	}
	out, err := yaml.Marshal(map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
