package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func TestLSClusters(t *testing.T) {
	t.Setenv("TROUPE_CLUSTER", "")
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 3, api.NodeList{Nodes: clitest.Nodes()})
	})
	var out, errb bytes.Buffer
	code := run([]string{"--addr", s.Addr, "-w"}, nil, &out, &errb)
	lines := strings.Split(out.String(), "\n")
	// Snakemake's LSF plugin: the second line's first word is the cluster.
	if code != 0 || len(lines) != 3 || strings.Fields(lines[1])[0] != "troupe" || !strings.HasPrefix(lines[0], "CLUSTER_NAME   STATUS") ||
		strings.Fields(lines[1])[4] != "5" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"--addr", s.Addr, "-noheader"}, nil, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "troupe ") {
		t.Errorf("-noheader: exit %d, %q", code, out.String())
	}
	if code := run([]string{"--addr", s.Addr, "other"}, nil, &out, &errb); code != 2 {
		t.Errorf("unknown cluster: exit %d", code)
	}
}
