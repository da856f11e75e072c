package jobspec_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/script"
)

// TestWarningForms: the three ways to ask for a warning signal (a job
// file's signal, Slurm's --signal, LSF's -wa and -wt) read as one
// Warning, and sbatch --signal=B:USR1@3 is the job file's
// signal = { name = "USR1", before = "3s" } (main1, the default).
func TestWarningForms(t *testing.T) {
	src := "job \"w\" {\n  image = \"host\"\n  walltime = \"6s\"\n  command = [\"true\"]\n  signal = { name = \"usr1\", before = \"3s\" }\n}\n"
	j, diags := jobspec.Parse("w.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(jobspec.FormatDiagnostics(diags))
	}
	want := jobspec.Warning{Signal: "USR1", Before: 3 * time.Second}
	if j.Signal == nil || *j.Signal != want {
		t.Fatalf("job file: %+v, want %+v", j.Signal, want)
	}
	w, err := jobspec.ParseSlurmSignal("B:USR1@3")
	if err != nil || *w != (jobspec.Warning{Signal: "USR1", Before: 3 * time.Second, To: jobspec.WarnMain1}) {
		t.Fatalf("--signal=B:USR1@3: %+v, %v", w, err)
	}
	if w.To != jobspec.WarnMain1 || j.Signal.To != "" {
		t.Errorf("B: and the job file's default both go to main1: %q, %q", w.To, j.Signal.To)
	}
	for _, c := range []struct {
		in   string
		want jobspec.Warning
	}{
		{"USR1@120", jobspec.Warning{Signal: "USR1", Before: 120 * time.Second, To: jobspec.WarnAll}},
		{"SIGUSR2", jobspec.Warning{Signal: "USR2", Before: 60 * time.Second, To: jobspec.WarnAll}},
		{"10@5", jobspec.Warning{Signal: "USR1", Before: 5 * time.Second, To: jobspec.WarnAll}},
		{"B:TERM@30", jobspec.Warning{Signal: "TERM", Before: 30 * time.Second, To: jobspec.WarnMain1}},
	} {
		got, err := jobspec.ParseSlurmSignal(c.in)
		if err != nil || *got != c.want {
			t.Errorf("--signal=%s: %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"R:USR1@60", "X:USR1", "USR1@0", "USR1@x", "KILL@10", "STOP", "NOPE@3", ""} {
		if _, err := jobspec.ParseSlurmSignal(bad); !errors.Is(err, jobspec.ErrWarning) {
			t.Errorf("--signal=%s: %v, want ErrWarning", bad, err)
		}
	}
	l, err := jobspec.ParseLSFWarning("USR1", "2")
	if err != nil || *l != (jobspec.Warning{Signal: "USR1", Before: 2 * time.Minute, To: jobspec.WarnAll}) {
		t.Fatalf("-wa USR1 -wt 2: %+v, %v", l, err)
	}
	if l, err := jobspec.ParseLSFWarning("SIGTERM", "1:30"); err != nil || l.Before != 90*time.Minute || l.Signal != "TERM" {
		t.Errorf("-wa SIGTERM -wt 1:30: %+v, %v", l, err)
	}
	for _, bad := range [][2]string{{"USR1", ""}, {"", "2"}, {"USR1", "0"}, {"USR1", "1:75"}, {"KILL", "2"}, {"USR1", "2m"}} {
		if _, err := jobspec.ParseLSFWarning(bad[0], bad[1]); !errors.Is(err, jobspec.ErrWarning) {
			t.Errorf("-wa %q -wt %q: %v, want ErrWarning", bad[0], bad[1], err)
		}
	}
}

// TestWarningDirectives: #SBATCH --signal and #BSUB -wa/-wt in a
// script make the job's warning; -wa without -wt is refused.
func TestWarningDirectives(t *testing.T) {
	for _, c := range []struct {
		src  string
		want *jobspec.Warning
		err  bool
	}{
		{"#!/bin/sh\n#SBATCH --signal=B:USR1@3\ntrue\n", &jobspec.Warning{Signal: "USR1", Before: 3 * time.Second, To: jobspec.WarnMain1}, false},
		{"#!/bin/sh\n#BSUB -wa USR2 -wt 2\ntrue\n", &jobspec.Warning{Signal: "USR2", Before: 2 * time.Minute, To: jobspec.WarnAll}, false},
		{"#!/bin/sh\n#BSUB -wa USR2\ntrue\n", nil, true},
		{"#!/bin/sh\ntrue\n", nil, false},
	} {
		s, err := script.Parse([]byte(c.src))
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		o := s.Options
		j, err := o.Job(script.Submit{Cwd: "/tmp", Script: s, Name: "s.sh", DefaultImage: "host"})
		if c.err {
			if err == nil {
				t.Errorf("%q: no error", c.src)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		if (j.Signal == nil) != (c.want == nil) || j.Signal != nil && *j.Signal != *c.want {
			t.Errorf("%q: %+v, want %+v", c.src, j.Signal, c.want)
		}
	}
}

// TestWarningValidate: a job file's signal is checked where it is
// written: a signal that cannot be caught, an unknown target or a time
// not shorter than the walltime is refused.
func TestWarningValidate(t *testing.T) {
	for _, c := range []struct{ sig, want string }{
		{`{ name = "KILL", before = "3s" }`, "cannot be caught"},
		{`{ name = "USR1", before = "3s", to = "sub1" }`, "signal's to"},
		{`{ name = "USR1", before = "10s" }`, "not shorter than the walltime"},
		{`{ name = "USR1" }`, "needs both name"},
		{`{ name = "USR1", before = "soon" }`, "not a positive duration"},
		{`{ name = "USR1", before = "3s", when = "x" }`, "no setting"},
		{`"USR1"`, "must be an object"},
	} {
		src := "job \"w\" {\n  image = \"host\"\n  walltime = \"6s\"\n  command = [\"true\"]\n  signal = " + c.sig + "\n}\n"
		_, diags := jobspec.Parse("w.hcl", []byte(src))
		msg := jobspec.FormatDiagnostics(diags)
		if !diags.HasErrors() || !strings.Contains(msg, c.want) || !strings.Contains(msg, "w.hcl:5") {
			t.Errorf("signal = %s: %q, want an error at w.hcl:5 saying %q", c.sig, msg, c.want)
		}
	}
}
