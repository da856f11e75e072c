package main

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func runBrelease(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func releaseSchedd(t *testing.T) *clitest.Schedd {
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 50, api.JobList{Jobs: clitest.Jobs(), Index: 50})
	})
	s.Handle("POST /v1/jobs/{id}/release", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "99":
			clitest.Error(w, http.StatusNotFound, "job 99: not found")
		case "12":
			clitest.Error(w, http.StatusConflict, "job 12 is RUNNING: only held jobs can be released")
		case "7":
			clitest.Error(w, http.StatusForbidden, "permission denied: job 7 belongs to carol; you (bob) may control only your own jobs")
		default:
			clitest.JSON(w, http.StatusOK, 60, api.Job{State: api.JobPending, Reason: api.ReasonPriority})
		}
	})
	return s
}

func TestRelease(t *testing.T) {
	s := releaseSchedd(t)
	code, out, errs := runBrelease("--addr", s.Addr, "15", "99", "12", "7", "16")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if want := "Job <15> is released.\nJob <16> is released.\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	want := "brelease: job 99: not found\nbrelease: job 12 is RUNNING: only held jobs can be released\n" +
		"brelease: permission denied: job 7 belongs to carol; you (bob) may control only your own jobs\n"
	if errs != want {
		t.Errorf("stderr %q, want %q", errs, want)
	}
	reqs := []string{"POST /v1/jobs/15/release", "POST /v1/jobs/99/release", "POST /v1/jobs/12/release", "POST /v1/jobs/7/release", "POST /v1/jobs/16/release"}
	if got := s.Requests(); !slices.Equal(got, reqs) {
		t.Errorf("requests %q", got)
	}

	code, out, errs = runBrelease("15", "--addr", s.Addr)
	if code != 0 || out != "Job <15> is released.\n" || errs != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestReleaseSelected(t *testing.T) {
	tests := []struct {
		args     []string
		releases []string
	}{
		{[]string{"-u", "bob"}, []string{"POST /v1/jobs/16/release"}}, // held only, not pending 15
		{[]string{"-u", "all", "-J", "later"}, []string{"POST /v1/jobs/16/release"}},
		{[]string{"-u", "all", "-t", "PD"}, []string{"POST /v1/jobs/15/release"}},
		{[]string{"-u", "bob", "-p", "cpu", "15", "16"}, []string{"POST /v1/jobs/16/release"}},
	}
	for _, tt := range tests {
		s := releaseSchedd(t)
		code, _, _ := runBrelease(append(tt.args, "--addr", s.Addr)...)
		want := append([]string{"GET /v1/jobs"}, tt.releases...)
		if got := s.Requests(); !slices.Equal(got, want) {
			t.Errorf("%q: exit %d, requests %q, want %q", tt.args, code, got, want)
		}
	}
	s := releaseSchedd(t)
	code, out, errs := runBrelease("-u", "alice", "--addr", s.Addr)
	if code != 1 || out != "" || errs != "brelease: no job matches\n" {
		t.Errorf("no match: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestUnreachable(t *testing.T) {
	addr := clitest.Unreachable(t)
	code, out, errs := runBrelease("--addr", addr, "1", "2")
	want := "brelease: cannot reach schedd at " + addr + ": connect: no such file or directory\n"
	if code != 1 || out != "" || errs != want {
		t.Errorf("exit %d, stdout %q, stderr %q, want %q", code, out, errs, want)
	}
}

func TestArgs(t *testing.T) {
	s := clitest.NewSchedd(t)
	tests := []struct {
		args []string
		errs string
	}{
		{nil, "brelease: missing job id (or -u, -t, -p, -J to choose jobs)"},
		{[]string{"-t", "SLEEPY"}, `brelease: -t: unknown job state "SLEEPY"; use PENDING, HELD, SCHEDULED, PREPARING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL or PREEMPTED (or LSF's PEND, RUN, SSUSP, DONE, EXIT, or Slurm's PD, R, S, CD, F, CA, TO, NF, PR)`},
		{[]string{"12", "0"}, `brelease: invalid job id "0": want a number such as 42, or an array element such as 42[5]`},
		{[]string{"-s", "KILL", "12"}, "brelease: flag provided but not defined: -s"},
	}
	for _, tt := range tests {
		code, out, errs := runBrelease(append(tt.args, "--addr", s.Addr)...)
		if code != 2 || out != "" || errs != tt.errs+"\nRun 'brelease -h' for usage.\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tt.args, code, out, errs)
		}
	}
	if reqs := s.Requests(); len(reqs) != 0 {
		t.Errorf("bad arguments reached schedd: %q", reqs)
	}
}

func TestHelp(t *testing.T) {
	code, out, errs := runBrelease("-h")
	if code != 0 || errs != "" || !strings.Contains(out, "Usage: brelease [flags] [JOBID...]") || !strings.Contains(out, "-t, --state states") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
}
