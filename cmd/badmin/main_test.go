package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func runBadmin(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func schedd(t *testing.T) *clitest.Schedd {
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/partitions", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 7, api.PartitionList{Policy: "fairshare", Partitions: []api.PartitionInfo{
			{Name: "batch", Default: true, Nodes: []string{"n1", "n2"}, MaxWalltime: 72 * time.Hour, DefaultWalltime: time.Hour,
				MaxClusterSize: 64, PriorityTier: 1, Capacity: api.Resources{CPUMilli: 128000, Memory: 512 << 30}, Pending: 3, Running: 2},
			{Name: "gpu", Nodes: []string{"g1"}, AllowedAccounts: []string{"research"}, AllowedModes: []string{"single-node"},
				Capacity: api.Resources{CPUMilli: 64000, Memory: 256 << 30, GPU: 8}},
		}})
	})
	s.Handle("GET /v1/fairshare", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 7, api.FairShareList{Rows: []api.FairShareRow{
			{Account: "research", RawShares: 60, NormShares: 0.6, RawUsage: 7200, EffectvUsage: 0.75, FairShare: 0.420448},
			{Account: "research", User: "alice", Depth: 1, RawShares: 1, NormShares: 0.6, RawUsage: 7200, EffectvUsage: 0.75, FairShare: 0.420448},
		}})
	})
	s.Handle("POST /v1/reconfig", func(w http.ResponseWriter, r *http.Request) {
		clitest.Error(w, http.StatusBadRequest, "partitions file refused: /etc/troupe/partitions.hcl:7:22: Invalid gpu_quantum; it is a fraction\n/etc/troupe/partitions.hcl:9:3: Unsupported argument")
	})
	return s
}

func TestPartitions(t *testing.T) {
	s := schedd(t)
	code, out, errs := runBadmin("--addr", s.Addr, "partitions")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d stderr %q", code, errs)
	}
	for _, want := range []string{"PARTITION", "batch*", "3d", "1h", "128", "gpu ", "research", "single-node"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runBadmin("--addr", s.Addr, "partitions", "-o", "json")
	var pl api.PartitionList
	if err := json.Unmarshal([]byte(out), &pl); code != 0 || err != nil || len(pl.Partitions) != 2 {
		t.Errorf("json: exit %d, %v", code, err)
	}
}

func TestFairShare(t *testing.T) {
	s := schedd(t)
	code, out, _ := runBadmin("--addr", s.Addr, "fairshare")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "Account  ") || !strings.Contains(lines[0], "EffectvUsage") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !strings.HasPrefix(lines[2], " research  alice") || !strings.Contains(lines[2], "0.420448") {
		t.Errorf("user row %q", lines[2])
	}
}

func TestReconfigRefused(t *testing.T) {
	s := schedd(t)
	code, out, errs := runBadmin("--addr", s.Addr, "reconfig")
	want := "badmin: partitions file refused: /etc/troupe/partitions.hcl:7:22: Invalid gpu_quantum; it is a fraction; /etc/troupe/partitions.hcl:9:3: Unsupported argument\n"
	if code != 1 || out != "" || errs != want {
		t.Errorf("exit %d stdout %q stderr %q", code, out, errs)
	}
}

func TestUsage(t *testing.T) {
	addr := clitest.Unreachable(t)
	if code, _, errs := runBadmin("--addr", addr, "partitions"); code != 1 || errs != "badmin: cannot reach schedd at "+addr+": connect: no such file or directory\n" {
		t.Errorf("unreachable: exit %d %q", code, errs)
	}
	for _, args := range [][]string{{}, {"nope"}, {"partitions", "extra"}} {
		if code, _, errs := runBadmin(args...); code != 2 || !strings.Contains(errs, "Run 'badmin -h' for usage.") {
			t.Errorf("%q: exit %d %q", args, code, errs)
		}
	}
}

func TestDrain(t *testing.T) {
	s := schedd(t)
	var got []api.NodeDrain
	s.Handle("POST /v1/nodes/drain", func(w http.ResponseWriter, r *http.Request) {
		var d api.NodeDrain
		_ = json.NewDecoder(r.Body).Decode(&d)
		got = append(got, d)
		var nodes []api.Node
		for _, n := range d.Nodes {
			st := api.NodeDraining
			if d.Resume {
				st = api.NodeUp
			}
			nodes = append(nodes, api.Node{Name: n, State: st, Drain: !d.Resume, Reason: d.Reason})
		}
		clitest.JSON(w, http.StatusOK, 0, api.NodeList{Nodes: nodes})
	})
	code, out, errs := runBadmin("--addr", s.Addr, "drain", "n1", "n2", "-r", "DIMM errors")
	if code != 0 || errs != "" || out != "n1: DRAINING (DIMM errors; its jobs go on, nothing new starts there)\nn2: DRAINING (DIMM errors; its jobs go on, nothing new starts there)\n" {
		t.Fatalf("drain: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// LSF's names do the same.
	if code, _, _ := runBadmin("--addr", s.Addr, "hclose", "--reason", "fan", "n3"); code != 0 {
		t.Fatalf("hclose: exit %d", code)
	}
	code, out, _ = runBadmin("--addr", s.Addr, "hopen", "n1")
	if code != 0 || out != "n1: UP\n" {
		t.Fatalf("hopen: exit %d, %q", code, out)
	}
	want := []api.NodeDrain{{Nodes: []string{"n1", "n2"}, Reason: "DIMM errors"}, {Nodes: []string{"n3"}, Reason: "fan"}, {Nodes: []string{"n1"}, Resume: true}}
	if len(got) != len(want) {
		t.Fatalf("requests %+v", got)
	}
	for i := range want {
		if strings.Join(got[i].Nodes, ",") != strings.Join(want[i].Nodes, ",") || got[i].Reason != want[i].Reason || got[i].Resume != want[i].Resume {
			t.Errorf("request %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	for _, tt := range []struct {
		args []string
		errs string
	}{
		{[]string{"drain", "n1"}, "badmin: badmin drain needs a reason: -r REASON"},
		{[]string{"drain", "-r", "x"}, "badmin: usage: badmin drain NODE... -r REASON"},
		{[]string{"resume"}, "badmin: usage: badmin resume NODE..."},
		{[]string{"resume", "n1", "-r", "x"}, "badmin: -r is for drain; resume takes no reason"},
	} {
		code, _, errs := runBadmin(append([]string{"--addr", s.Addr}, tt.args...)...)
		if code != 2 || !strings.HasPrefix(errs, tt.errs+"\n") {
			t.Errorf("%v: exit %d, stderr %q", tt.args, code, errs)
		}
	}
	if len(got) != 3 {
		t.Errorf("usage errors sent requests: %+v", got[3:])
	}
}
