package main

import (
	"bytes"
	"encoding/json"
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
		{nil, "bkill: missing job id (or -u, -t, -p, -J to choose jobs)"},
		{[]string{"-t", "SLEEPY"}, `bkill: -t: unknown job state "SLEEPY"; use PENDING, HELD, SCHEDULED, PREPARING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL or PREEMPTED (or LSF's PEND, RUN, SSUSP, DONE, EXIT, or Slurm's PD, R, S, CD, F, CA, TO, NF, PR)`},
		{[]string{"12", "abc"}, `bkill: invalid job id "abc": want a number such as 42, or an array element such as 42[5]`},
		{[]string{"-x", "12"}, "bkill: flag provided but not defined: -x"},
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
	if code != 0 || errs != "" || !strings.Contains(out, "Usage: bkill [flags] [JOBID | \"JOBID[INDEX]\"...]") || !strings.Contains(out, "bkill 42 43 44") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
}

func killSchedd(t *testing.T) *clitest.Schedd {
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 50, api.JobList{Jobs: clitest.Jobs(), Index: 50})
	})
	s.Handle("POST /v1/jobs/{id}/kill", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 60, api.Job{State: api.JobCancelled})
	})
	s.Handle("POST /v1/jobs/{id}/signal", func(w http.ResponseWriter, r *http.Request) {
		var req api.SignalJob
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Signal == "" {
			clitest.Error(w, http.StatusBadRequest, "bad body")
			return
		}
		if r.PathValue("id") == "15" && req.Signal == "USR1" {
			clitest.Error(w, http.StatusConflict, "job 15 is PENDING: only a running job's containers can get SIGUSR1; KILL, TERM or INT cancels it")
			return
		}
		clitest.JSON(w, http.StatusOK, 60, api.Job{State: api.JobRunning, Signals: []api.SignalRequest{{Seq: 1, Host: req.Host}}})
	})
	return s
}

func TestKillSelected(t *testing.T) {
	tests := []struct {
		args  []string
		kills []string
	}{
		{[]string{"-u", "bob"}, []string{"POST /v1/jobs/15/kill", "POST /v1/jobs/16/kill"}},
		{[]string{"-u", "all", "-t", "PEND,HELD"}, []string{"POST /v1/jobs/15/kill", "POST /v1/jobs/16/kill"}},
		{[]string{"-u", "all", "--state", "R"}, []string{"POST /v1/jobs/12/kill"}},
		{[]string{"-u", "all", "-p", "cpu"}, []string{"POST /v1/jobs/16/kill"}},
		{[]string{"-u", "bob", "16", "12"}, []string{"POST /v1/jobs/16/kill"}},
		{[]string{"-u", "alice", "-J", "train", "-s", "TERM"}, []string{"POST /v1/jobs/12/signal"}},
	}
	for _, tt := range tests {
		s := killSchedd(t)
		code, _, errs := runBkill(append(tt.args, "--addr", s.Addr)...)
		want := append([]string{"GET /v1/jobs"}, tt.kills...)
		if got := s.Requests(); code != 0 || !slices.Equal(got, want) {
			t.Errorf("%q: exit %d, stderr %q, requests %q, want %q", tt.args, code, errs, got, want)
		}
	}
	s := killSchedd(t)
	code, out, errs := runBkill("-u", "nobody-here", "--addr", s.Addr)
	if code != 1 || out != "" || errs != "bkill: no job matches\n" {
		t.Errorf("no match: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestSignal(t *testing.T) {
	s := killSchedd(t)
	for _, sig := range []string{"USR1", "SIGusr1", "10"} {
		code, out, errs := runBkill("-s", sig, "12", "--addr", s.Addr)
		if code != 0 || out != "Job <12> is being signalled (SIGUSR1).\n" || errs != "" {
			t.Errorf("-s %s: exit %d, stdout %q, stderr %q", sig, code, out, errs)
		}
	}
	code, out, errs := runBkill("-s", "USR1", "12", "15", "--host", "main1", "--addr", s.Addr)
	if code != 1 || out != "Job <12> is being signalled (SIGUSR1).\n" ||
		errs != "bkill: job 15 is PENDING: only a running job's containers can get SIGUSR1; KILL, TERM or INT cancels it\n" {
		t.Errorf("pending: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	want := []string{"POST /v1/jobs/12/signal", "POST /v1/jobs/12/signal", "POST /v1/jobs/12/signal", "POST /v1/jobs/12/signal", "POST /v1/jobs/15/signal"}
	if got := s.Requests(); !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}

	s = killSchedd(t)
	for _, sig := range []string{"BOGUS", "0", "65", ""} {
		code, out, errs := runBkill("-s", sig, "12", "--addr", s.Addr)
		if sig == "" {
			continue // -s "" is no -s: cancel
		}
		if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "bkill: -s: signal ") {
			t.Errorf("-s %q: exit %d, stdout %q, stderr %q", sig, code, out, errs)
		}
	}
	code, _, errs = runBkill("--host", "main1", "12", "--addr", s.Addr)
	if code != 2 || !strings.HasPrefix(errs, "bkill: --host picks the container -s signals; give -s too\n") {
		t.Errorf("--host alone: exit %d, stderr %q", code, errs)
	}
	if reqs := s.Requests(); !slices.Equal(reqs, []string{"POST /v1/jobs/12/kill"}) {
		t.Errorf("refused signals reached schedd: %q", reqs)
	}
}

func TestKillDone(t *testing.T) {
	s := clitest.NewSchedd(t)
	var queries []string
	s.Handle("POST /v1/jobs/{id}/kill", func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.PathValue("id")+"?"+r.URL.RawQuery)
		clitest.JSON(w, http.StatusOK, 60, api.Job{State: api.JobCompleted})
	})
	code, out, errs := runBkill("--addr", s.Addr, "-d", "12", "13")
	if code != 0 || out != "Job <12> is being terminated.\nJob <13> is being terminated.\n" || errs != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if !slices.Equal(queries, []string{"12?done=true", "13?done=true"}) {
		t.Errorf("queries %q", queries)
	}
	if code, _, errs := runBkill("--addr", s.Addr, "-d", "-s", "USR1", "12"); code != 2 || !strings.Contains(errs, "-d records a killed job as DONE") {
		t.Errorf("-d -s: exit %d, %q", code, errs)
	}
}

// Open OnDemand's delete, its cluster set: bkill -m CLUSTER ID. The
// cluster's name (what lsid prints) is the whole cluster; troupe acts on
// jobs by id, not by the hosts they run on, so a host name is refused,
// naming the option, and nothing is killed.
func TestHostsOption(t *testing.T) {
	t.Setenv("TROUPE_CLUSTER", "hpc1")
	s := clitest.NewSchedd(t)
	s.Handle("POST /v1/jobs/{id}/kill", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 60, api.Job{State: api.JobRunning, KillWanted: true})
	})
	code, out, errs := runBkill("--addr", s.Addr, "-m", "hpc1", "12")
	if code != 0 || out != "Job <12> is being terminated.\n" || errs != "" {
		t.Errorf("bkill -m hpc1 12: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = runBkill("--addr", s.Addr, "-m", "node01", "15")
	if want := `bkill: -m node01: troupe places jobs by partition (-q), not on named hosts; -m takes only the cluster's name, "hpc1" (the whole cluster)`; code != 2 || out != "" || !strings.HasPrefix(errs, want) {
		t.Errorf("bkill -m node01 15: exit %d, stdout %q, stderr %q, want %q", code, out, errs, want)
	}
	if got := s.Requests(); !slices.Equal(got, []string{"POST /v1/jobs/12/kill"}) {
		t.Errorf("requests %q", got)
	}
}
