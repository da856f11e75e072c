package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched"
)

// TestArrays: against a real schedd, a job array of 200 (more than have
// rows yet) is one line with its elements by state; --array lists all
// 200 elements, 1[1] to 1[200]; an element killed by name shows in both.
func TestArrays(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sched.Open(ctx, sched.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); srv.Close() })
	c, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	spec := jobspec.Job{Name: "sweep", Image: "host", Command: []string{"true"},
		Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode}, Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30},
		Array: &jobspec.Array{Range: "1-200"}}
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec), Cwd: "/tmp", User: "amy"})
	if err != nil || res.JobID != 1 {
		t.Fatalf("submit: %v, %v", res, err)
	}
	if _, err := c.Control(ctx, api.JobRef{ID: 1, Index: 150, Element: true}, "kill", nil); err != nil {
		t.Fatal(err)
	}

	code, out, errs := runBqueue("--addr", hs.URL, "-a", "-O", "jobid,name,state,reason")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[1]), " ") != "1[1-200] sweep PENDING PEND 199 EXIT 1" {
		t.Fatalf("bqueue -a:\n%s", out)
	}

	code, out, errs = runBqueue("--addr", hs.URL, "-a", "--array", "-O", "jobid,state")
	if code != 0 || errs != "" {
		t.Fatalf("--array: exit %d, stderr %q", code, errs)
	}
	got := ids(out) // queue order: the pending ones by index, then the ended one
	if len(got) != 200 || got[0] != "1[1]" || got[198] != "1[200]" || got[199] != "1[150]" {
		t.Fatalf("--array lists %d: %v … %v", len(got), got[:min(len(got), 3)], got[max(len(got)-3, 0):])
	}
	if !strings.Contains(out, "1[150]") || !strings.Contains(lines[0], "JOBID") {
		t.Fatalf("--array lacks the killed element:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "1[150]" && f[1] != "CANCELLED" {
			t.Fatalf("element 150: %s", l)
		}
	}
}
