package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// traces is the directory of the SWF workload traces the tests replay
// (the Parallel Workloads Archive's KTH-SP2, LANL-CM5 and Lublin's
// model), named by $TROUPE_TRACES; the repository does not hold them.
// `make test` sets it where it finds them.
func traces(t *testing.T) string {
	t.Helper()
	d := os.Getenv("TROUPE_TRACES")
	if d == "" {
		t.Skip("SKIPPED: no workload traces: set TROUPE_TRACES to a directory holding KTH-SP2-1996-2.1-cln.swf.gz")
	}
	if _, err := os.Stat(filepath.Join(d, "KTH-SP2-1996-2.1-cln.swf.gz")); err != nil {
		t.Fatalf("TROUPE_TRACES=%s: %v", d, err)
	}
	return d
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
	for _, args := range [][]string{{}, {"--policy", "sjf", "x.swf"}, {"/nonexistent.swf"}, {"--synthetic", "nope"},
		{"--user-max-jobs", "-1", "x.swf"}, {"--user-max-cpu", "-1", "x.swf"}} {
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

// The JSON report and the --compare table on a small committed trace.
func TestReportAndCompare(t *testing.T) {
	small := filepath.Join("testdata", "small.swf")
	o := runJSON(t, "--policy", "easy", small)
	if o.Jobs != 4 || len(o.Classes) != 4 || o.Classes[3].Wait.Max != 99 || len(o.Users) != 3 {
		t.Errorf("report %+v", o)
	}
	var out, errb bytes.Buffer
	if err := run([]string{"-q", "--policy", "fcfs", "--compare", "easy", small}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	// FCFS: job 4 waits for job 3 to start (150): waits 0, 99, 148, 147.
	for _, want := range []string{
		"4 jobs, fcfs ÷ easy",
		"mean wait (s)    98.5    61.8    1.595",
		"max wait (s)   148.0   148.0    1.000",
		"mean wait >1/4 machine (s)    99.0    99.0    1.000",
		"p99 wait 1 (s)   147.0     0.0        -",
		"utilization  0.3232  0.3232  +0.0000",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("compare table lacks %q:\n%s", want, out.String())
		}
	}
	if err := run([]string{"--compare", "sjf", small}, &out, &errb); err == nil || !strings.Contains(err.Error(), "--compare") {
		t.Errorf("--compare sjf: %v", err)
	}
}

// TestDefaultAgainstEasy holds the default policy to issue 18 on the
// shared traces: better mean bounded slowdown and mean wait than EASY at
// utilization within 1%, max wait within 1.05× and the mean wait of jobs
// wider than a quarter of the machine within 1.1× EASY's. Lublin runs
// always (a few seconds); KTH and LANL (half a minute) with
// TROUPE_ALL_TRACES=1.
func TestDefaultAgainstEasy(t *testing.T) {
	dir := traces(t)
	files := []string{"lublin_256.swf.gz"}
	if os.Getenv("TROUPE_ALL_TRACES") != "" {
		files = append(files, "KTH-SP2-1996-2.1-cln.swf.gz", "LANL-CM5-1994-4.1-cln.swf.gz")
	} else {
		t.Log("KTH and LANL skipped: set TROUPE_ALL_TRACES=1")
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			path := filepath.Join(dir, f)
			d, e := runJSON(t, "--policy", "default", path), runJSON(t, "--policy", "easy", path)
			t.Logf("default ÷ easy: bsld %.3f, wait %.3f, max wait %.3f, wide wait %.3f, utilization %+.4f",
				d.MeanBSLD/e.MeanBSLD, d.MeanWait/e.MeanWait, d.MaxWait/e.MaxWait, d.WideMeanWait/e.WideMeanWait, d.Utilization-e.Utilization)
			if d.MeanBSLD >= e.MeanBSLD || d.MeanWait >= e.MeanWait {
				t.Errorf("bounded slowdown %.1f vs easy %.1f, mean wait %.0f vs %.0f: want both below", d.MeanBSLD, e.MeanBSLD, d.MeanWait, e.MeanWait)
			}
			if d.MaxWait > 1.05*e.MaxWait || d.WideMeanWait > 1.1*e.WideMeanWait {
				t.Errorf("max wait %.0f vs easy %.0f (≤ 1.05×), wide mean wait %.0f vs %.0f (≤ 1.1×)", d.MaxWait, e.MaxWait, d.WideMeanWait, e.WideMeanWait)
			}
			if math.Abs(d.Utilization-e.Utilization) > 0.01 {
				t.Errorf("utilization %.4f vs easy %.4f", d.Utilization, e.Utilization)
			}
		})
	}
}

// TestUserLimitFlags on the small trace under EASY: user 1's job 4 (1
// proc, 5 s) backfills at 3 s without limits; with one running job per
// user it waits for the user's job 1 to end and starts with job 3 at 150
// (mean wait 61.75 → 98.5 s). With one processor per user the 8- and
// 2-processor jobs are dropped, as schedd refuses them, and job 4 waits
// for job 1.
func TestUserLimitFlags(t *testing.T) {
	small := filepath.Join("testdata", "small.swf")
	for _, tt := range []struct {
		args     []string
		jobs     int
		dropped  int
		meanWait float64
	}{
		{nil, 4, 0, 61.75},
		{[]string{"--user-max-jobs", "1"}, 4, 0, 98.5},
		{[]string{"--user-max-cpu", "1"}, 2, 2, 48.5},
	} {
		o := runJSON(t, append(append([]string{"--policy", "easy"}, tt.args...), small)...)
		if o.Jobs != tt.jobs || o.Dropped != tt.dropped || o.MeanWait != tt.meanWait {
			t.Errorf("bsim %v: %d jobs, %d dropped, mean wait %g; want %d, %d, %g",
				tt.args, o.Jobs, o.Dropped, o.MeanWait, tt.jobs, tt.dropped, tt.meanWait)
		}
	}
}

// TestPrecedingFlag on the small trace under EASY: job 4 names job 3 as
// its preceding job. Ignored, job 4 (1 proc, 5 s) backfills at 3 s; with
// --preceding it depends on job 3's end (ended(3)) and starts at 350,
// when job 3 (started at 150, 200 s) ends: mean wait 61.75 → 148.5 s. The
// others start as before: waiting on its dependency, job 4 blocks nobody.
func TestPrecedingFlag(t *testing.T) {
	small := filepath.Join("testdata", "small.swf")
	for _, tt := range []struct {
		args     []string
		deps     int
		meanWait float64
		maxWait  float64
	}{
		{nil, 0, 61.75, 148},
		{[]string{"--preceding"}, 1, 148.5, 347},
	} {
		o := runJSON(t, append(append([]string{"--policy", "easy"}, tt.args...), small)...)
		if o.Jobs != 4 || o.Dependencies != tt.deps || o.MeanWait != tt.meanWait || o.MaxWait != tt.maxWait {
			t.Errorf("bsim %v: %d jobs, %d dependencies, mean wait %g, max wait %g; want 4, %d, %g, %g",
				tt.args, o.Jobs, o.Dependencies, o.MeanWait, o.MaxWait, tt.deps, tt.meanWait, tt.maxWait)
		}
	}
}

// TestLANLPreempt24h replays the first 24 h of the LANL CM-5 log with
// queue 2 as QOS high, preempting everything else (requeued): high jobs
// wait less than without preemption, and no job is preempted twice
// within the window.
func TestLANLPreempt24h(t *testing.T) {
	lanl := filepath.Join(traces(t), "LANL-CM5-1994-4.1-cln.swf.gz")
	o := runJSON(t, "--qos-map", "2=high,*=low", "--span", "24h", lanl)
	p := o.Preemption
	if p == nil || p.Preemptions == 0 || p.Urgent.Jobs == 0 {
		t.Fatalf("preemption %+v; want preemptions of low jobs for high ones", p)
	}
	if p.Twice != 0 {
		t.Errorf("%d preemptions of a job preempted within the window", p.Twice)
	}
	var out, errb bytes.Buffer
	if err := run([]string{"-q", "--qos-map", "2=high,*=low", "--span", "24h", "--compare", "no-preempt", lanl}, &out, &errb); err != nil {
		t.Fatalf("--compare no-preempt: %v\n%s", err, errb.String())
	}
	t.Logf("\n%s", out.String())
	if !strings.Contains(out.String(), "urgent mean wait") || !strings.Contains(out.String(), "lost core-hours") {
		t.Errorf("the comparison table lacks the urgent wait or the lost work:\n%s", out.String())
	}
}
