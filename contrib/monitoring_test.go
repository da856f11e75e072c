// Package contrib holds files shipped beside troupe; this test checks the
// Grafana dashboard and Prometheus rules against the metrics the daemons
// export.
package contrib

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"
)

// exported are the troupe_* metric names defined in sched/metrics.go and
// nodelet/metrics.go.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	re := regexp.MustCompile(`"(troupe_[a-z0-9_]+)"`)
	for _, f := range []string{"../sched/metrics.go", "../nodelet/metrics.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
	}
	if len(names) < 20 {
		t.Fatalf("found only %d metric names in the daemons' metrics.go: %v", len(names), names)
	}
	return names
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
	known := exported(t)
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
	ids, usedAll := map[int]bool{}, map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
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
			for _, u := range used {
				usedAll[u] = true
			}
		}
	}
	// What the issue asks the dashboard to show.
	for _, w := range []string{"troupe_schedd_jobs", "troupe_schedd_queue_wait_seconds_bucket",
		"troupe_schedd_scheduling_pass_duration_seconds_bucket", "troupe_schedd_placements_total",
		"troupe_schedd_node_cpu_allocated_cores", "troupe_nodelet_gpu_allocated_ratio",
		"troupe_nodelet_container_failures_total"} {
		if !usedAll[w] {
			t.Errorf("no panel shows %s", w)
		}
	}
}

func TestPrometheusRules(t *testing.T) {
	known := exported(t)
	b, err := os.ReadFile("prometheus/troupe-rules.yml")
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
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %s lacks a severity label or a summary", r.Alert)
			}
			used, unknown := unknownMetrics(r.Expr, known)
			if len(used) == 0 {
				t.Errorf("alert %s uses no troupe metric: %s", r.Alert, r.Expr)
			}
			for _, u := range unknown {
				t.Errorf("alert %s uses %s, which no daemon exports", r.Alert, u)
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
				t.Errorf("alert %s: unbalanced parentheses in %s", r.Alert, r.Expr)
			}
		}
	}
	for _, w := range []string{"TroupeNodeDown", "TroupeSchedulingPassSlow", "TroupeNoLeader",
		"TroupeJobsPendingOnResources", "TroupeContainerFailures", "TroupeOOMKills"} {
		if !alerts[w] {
			t.Errorf("alert %s missing", w)
		}
	}
}
