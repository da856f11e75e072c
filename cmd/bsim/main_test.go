package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// traces finds the shared SWF traces: $TROUPE_TRACES, else ../shared/traces
// beside the repository, else /work/shared/traces. They are never copied
// into the repository.
func traces(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv("TROUPE_TRACES"), filepath.Join("..", "..", "..", "shared", "traces"), "/work/shared/traces"}
	for _, d := range cands {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "KTH-SP2-1996-2.1-cln.swf.gz")); err == nil {
			return d
		}
	}
	t.Skip("SKIPPED: shared traces not found (set TROUPE_TRACES; looked in ../shared/traces and /work/shared/traces)")
	return ""
}

func runJSON(t *testing.T, args ...string) Output {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(append([]string{"-q"}, args...), &out, &errb); err != nil {
		t.Fatalf("bsim %v: %v\n%s", args, err, errb.String())
	}
	var o Output
	if err := json.Unmarshal(out.Bytes(), &o); err != nil {
		t.Fatalf("output: %v\n%s", err, out.String())
	}
	return o
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 0.01*want {
		t.Errorf("%s = %.4g, want %.4g within 1%%", what, got, want)
	}
}

// TestKTHEasy reproduces textbook EASY (pyss) on the KTH SP2 log.
func TestKTHEasy(t *testing.T) {
	kth := filepath.Join(traces(t), "KTH-SP2-1996-2.1-cln.swf.gz")
	o := runJSON(t, "--policy", "easy", kth)
	if o.Jobs != 28475 {
		t.Errorf("jobs = %d, want 28475", o.Jobs)
	}
	near(t, "mean wait", o.MeanWait, 6858)
	near(t, "mean bounded slowdown", o.MeanBSLD, 91.0)
	near(t, "utilization", o.Utilization, 0.701)
	if testing.Short() {
		return
	}
	f := runJSON(t, "--policy", "fcfs", kth)
	near(t, "fcfs mean bounded slowdown", f.MeanBSLD, 7522)
}

func TestBadInput(t *testing.T) {
	var out, errb bytes.Buffer
	for _, args := range [][]string{{}, {"--policy", "sjf", "x.swf"}, {"/nonexistent.swf"}, {"--synthetic", "nope"}} {
		if err := run(args, &out, &errb); err == nil {
			t.Errorf("bsim %v: no error", args)
		}
	}
}

func TestSynthetic(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run([]string{"--synthetic", "place", "--nodes", "50", "--jobs", "500"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var r struct{ Placed int }
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Placed == 0 {
		t.Fatalf("synthetic: %v %s", err, out.String())
	}
}
