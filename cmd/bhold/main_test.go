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

func runBhold(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func holdSchedd(t *testing.T) *clitest.Schedd {
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 50, api.JobList{Jobs: clitest.Jobs(), Index: 50})
	})
	s.Handle("POST /v1/jobs/{id}/hold", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "99":
			clitest.Error(w, http.StatusNotFound, "job 99: not found")
		case "12":
			clitest.Error(w, http.StatusConflict, "job 12 is RUNNING: only pending jobs can be held")
		case "7":
			clitest.Error(w, http.StatusForbidden, "permission denied: job 7 belongs to carol; you (bob) may control only your own jobs")
		default:
			clitest.JSON(w, http.StatusOK, 60, api.Job{State: api.JobHeld, Reason: api.ReasonHeld})
		}
	})
	return s
}

func TestHold(t *testing.T) {
	s := holdSchedd(t)
	code, out, errs := runBhold("--addr", s.Addr, "15", "99", "12", "7", "16")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if want := "Job <15> is held.\nJob <16> is held.\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	want := "bhold: job 99: not found\nbhold: job 12 is RUNNING: only pending jobs can be held\n" +
		"bhold: permission denied: job 7 belongs to carol; you (bob) may control only your own jobs\n"
	if errs != want {
		t.Errorf("stderr %q, want %q", errs, want)
	}
	reqs := []string{"POST /v1/jobs/15/hold", "POST /v1/jobs/99/hold", "POST /v1/jobs/12/hold", "POST /v1/jobs/7/hold", "POST /v1/jobs/16/hold"}
	if got := s.Requests(); !slices.Equal(got, reqs) {
		t.Errorf("requests %q", got)
	}

	code, out, errs = runBhold("15", "--addr", s.Addr)
	if code != 0 || out != "Job <15> is held.\n" || errs != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestHoldSelected(t *testing.T) {
	tests := []struct {
		args  []string
		holds []string
	}{
		{[]string{"-u", "bob"}, []string{"POST /v1/jobs/15/hold"}}, // pending only, not held 16
		{[]string{"-u", "all"}, []string{"POST /v1/jobs/15/hold"}},
		{[]string{"-u", "all", "-t", "R"}, []string{"POST /v1/jobs/12/hold"}},
		{[]string{"-u", "bob", "-p", "gpu", "15", "16"}, []string{"POST /v1/jobs/15/hold"}},
	}
	for _, tt := range tests {
		s := holdSchedd(t)
		code, _, _ := runBhold(append(tt.args, "--addr", s.Addr)...)
		want := append([]string{"GET /v1/jobs"}, tt.holds...)
		if got := s.Requests(); !slices.Equal(got, want) {
			t.Errorf("%q: exit %d, requests %q, want %q", tt.args, code, got, want)
		}
	}
	s := holdSchedd(t)
	code, out, errs := runBhold("-u", "alice", "--addr", s.Addr)
	if code != 1 || out != "" || errs != "bhold: no job matches\n" {
		t.Errorf("no match: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestUnreachable(t *testing.T) {
	addr := clitest.Unreachable(t)
	code, out, errs := runBhold("--addr", addr, "1", "2")
	want := "bhold: cannot reach schedd at " + addr + ": connect: no such file or directory\n"
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
		{nil, "bhold: missing job id (or -u, -t, -p, -J to choose jobs)"},
		{[]string{"-t", "SLEEPY"}, `bhold: -t: unknown job state "SLEEPY"; use PENDING, HELD, SCHEDULED, PREPARING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL or PREEMPTED (or LSF's PEND, RUN, SSUSP, DONE, EXIT, or Slurm's PD, R, S, CD, F, CA, TO, NF, PR)`},
		{[]string{"12", "0"}, `bhold: invalid job id "0": want a number such as 42, or an array element such as 42[5]`},
		{[]string{"-s", "KILL", "12"}, "bhold: flag provided but not defined: -s"},
	}
	for _, tt := range tests {
		code, out, errs := runBhold(append(tt.args, "--addr", s.Addr)...)
		if code != 2 || out != "" || errs != tt.errs+"\nRun 'bhold -h' for usage.\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tt.args, code, out, errs)
		}
	}
	if reqs := s.Requests(); len(reqs) != 0 {
		t.Errorf("bad arguments reached schedd: %q", reqs)
	}
}

func TestHelp(t *testing.T) {
	code, out, errs := runBhold("-h")
	if code != 0 || errs != "" || !strings.Contains(out, "Usage: bhold [flags] [JOBID...]") || !strings.Contains(out, "-t, --state states") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
}
