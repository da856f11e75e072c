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

func runBkill(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestKill(t *testing.T) {
	s := clitest.NewSchedd(t)
	s.Handle("POST /v1/jobs/{id}/kill", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "99":
			clitest.Error(w, http.StatusNotFound, "no job 99")
		case "3":
			clitest.Error(w, http.StatusConflict, "job 3: already ended (COMPLETED)")
		default:
			clitest.JSON(w, http.StatusOK, 60, api.Job{State: api.JobRunning, KillWanted: true})
		}
	})
	code, out, errs := runBkill("--addr", s.Addr, "12", "99", "3", "15")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if want := "Job <12> is being terminated.\nJob <15> is being terminated.\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if want := "bkill: job 99: not found\nbkill: job 3: already ended (COMPLETED)\n"; errs != want {
		t.Errorf("stderr %q, want %q", errs, want)
	}
	want := []string{"POST /v1/jobs/12/kill", "POST /v1/jobs/99/kill", "POST /v1/jobs/3/kill", "POST /v1/jobs/15/kill"}
	if got := s.Requests(); !slices.Equal(got, want) {
		t.Errorf("requests %q", got)
	}

	code, out, errs = runBkill("--addr", s.Addr, "12")
	if code != 0 || out != "Job <12> is being terminated.\n" || errs != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestUnreachable(t *testing.T) {
	addr := clitest.Unreachable(t)
	code, out, errs := runBkill("--addr", addr, "1", "2", "3")
	want := "bkill: cannot reach schedd at " + addr + ": connect: no such file or directory\n"
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
		{nil, "bkill: missing job id"},
		{[]string{"12", "abc"}, `bkill: invalid job id "abc": want a number such as 42`},
		{[]string{"-s", "KILL", "12"}, "bkill: flag provided but not defined: -s"},
	}
	for _, tt := range tests {
		code, out, errs := runBkill(append(tt.args, "--addr", s.Addr)...)
		if code != 2 || out != "" || errs != tt.errs+"\nRun 'bkill -h' for usage.\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tt.args, code, out, errs)
		}
	}
	if reqs := s.Requests(); len(reqs) != 0 {
		t.Errorf("bad arguments reached schedd: %q", reqs)
	}
}

func TestHelp(t *testing.T) {
	code, out, errs := runBkill("-h")
	if code != 0 || errs != "" || !strings.Contains(out, "Usage: bkill [flags] JOBID...") || !strings.Contains(out, "bkill 42 43 44") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
}
