package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func runBhosts(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func hostsSchedd(t *testing.T, nodes []api.Node) *clitest.Schedd {
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 50, api.NodeList{Nodes: nodes, Index: 50})
	})
	return s
}

func TestTable(t *testing.T) {
	s := hostsSchedd(t, clitest.Nodes())
	code, out, errs := runBhosts("--addr", s.Addr)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "HOST") || !strings.HasPrefix(lines[1], "node01") {
		t.Errorf("table:\n%s", out)
	}
	if !strings.Contains(out, "8.5/64") || !strings.Contains(out, "32/251.5GiB") {
		t.Errorf("amounts:\n%s", out)
	}
	for _, want := range []string{"node04  DRAINING", "DIMM errors, ticket 4711", "node05  DRAINED ", "Not responding", "gpu,rack=a  gpu"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestJSON(t *testing.T) {
	s := hostsSchedd(t, clitest.Nodes())
	code, out, _ := runBhosts("--addr", s.Addr, "-o", "json")
	var nodes []api.Node
	if err := json.Unmarshal([]byte(out), &nodes); code != 0 || err != nil || len(nodes) != 5 {
		t.Errorf("exit %d, %v, %d nodes", code, err, len(nodes))
	}
	s = hostsSchedd(t, nil)
	if code, out, _ := runBhosts("--addr", s.Addr, "-o", "json"); code != 0 || out != "[]\n" {
		t.Errorf("no nodes: exit %d, %q", code, out)
	}
}

func TestUnreachable(t *testing.T) {
	addr := clitest.Unreachable(t)
	code, out, errs := runBhosts("--addr", addr)
	want := "bhosts: cannot reach schedd at " + addr + ": connect: no such file or directory\n"
	if code != 1 || out != "" || errs != want {
		t.Errorf("exit %d, stdout %q, stderr %q, want %q", code, out, errs, want)
	}
}

func TestArgs(t *testing.T) {
	code, out, errs := runBhosts("node01")
	if code != 2 || out != "" || errs != "bhosts: unexpected argument \"node01\"\nRun 'bhosts -h' for usage.\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestHelp(t *testing.T) {
	code, out, errs := runBhosts("-h")
	if code != 0 || errs != "" || !strings.Contains(out, "Usage: bhosts [flags]") || !strings.Contains(out, "Examples:") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
}

// bhosts prints what the golden files hold.
func TestGolden(t *testing.T) {
	s := hostsSchedd(t, clitest.Nodes())
	for _, tt := range []struct{ golden, format string }{{"hosts.golden", "table"}, {"hosts.json.golden", "json"}} {
		_, out, _ := runBhosts("--addr", s.Addr, "-o", tt.format)
		if want := clitest.Golden(t, tt.golden); out != want {
			t.Errorf("got\n%s\nwant testdata/cli/%s", out, tt.golden)
		}
	}
}

// TestLong (issue 14 item 6h): bhosts -l shows each GPU device's share
// allocated and free and the jobs holding it, and the OCI runtime a
// node registered.
func TestLong(t *testing.T) {
	s := hostsSchedd(t, clitest.Nodes())
	code, out, errs := runBhosts("--addr", s.Addr, "-l")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"HOST node01\n", "OCI runtime: runc 1.1.5\n", "GPU:         1 of 4 allocated", "  GPU  ALLOCATED  FREE  JOBS\n",
		"  2    0.25       0.75  14,15\n", "  3    0          1     -\n", "OCI runtime: crun 1.8.1\n", "HOST node05\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("bhosts -l lacks %q:\n%s", want, out)
		}
	}
}
