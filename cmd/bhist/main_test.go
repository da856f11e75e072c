package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func runBhist(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// histSchedd answers GET /v1/history with the fixtures and records the
// queries it got.
func histSchedd(t *testing.T) (*clitest.Schedd, *[]url.Values) {
	s := clitest.NewSchedd(t)
	var qs []url.Values
	s.Handle("GET /v1/history", func(w http.ResponseWriter, r *http.Request) {
		qs = append(qs, r.URL.Query())
		clitest.JSON(w, http.StatusOK, 50, api.History{Jobs: clitest.History(), Index: 50})
	})
	s.Handle("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		var out []api.Job
		for _, j := range clitest.Jobs() {
			if users := r.URL.Query()["user"]; !j.State.Terminal() && (len(users) == 0 || slices.Contains(users, j.User)) {
				out = append(out, j)
			}
		}
		clitest.JSON(w, http.StatusOK, 50, api.JobList{Jobs: out, Index: 50})
	})
	s.Handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		for _, j := range clitest.Jobs() {
			if r.PathValue("id") == strconv.FormatUint(j.ID, 10) {
				clitest.JSON(w, http.StatusOK, 50, j)
				return
			}
		}
		clitest.Error(w, http.StatusNotFound, "job "+r.PathValue("id")+" not found")
	})
	return s, &qs
}

func TestQueries(t *testing.T) {
	me := cli.CurrentUser()
	tests := []struct {
		args []string
		want url.Values
	}{
		{nil, url.Values{"user": {me}}},
		{[]string{"-a"}, url.Values{"user": {me}}}, // LSF's -a: every state, not every user
		{[]string{"-a", "-u", "all"}, url.Values{}},
		{[]string{"-u", "all"}, url.Values{}},
		{[]string{"-u", "bob", "-n", "5"}, url.Values{"user": {"bob"}, "limit": {"5"}}},
		{[]string{"-C", "2026-11-01T10:00:00Z,2026-11-02T00:00:00Z"}, url.Values{"user": {me},
			"ended_from": {"2026-11-01T10:00:00Z"}, "ended_to": {"2026-11-02T00:00:00Z"}}},
		{[]string{"-S", ",2026-11-02T01:00:00+01:00"}, url.Values{"user": {me}, "submitted_to": {"2026-11-02T00:00:00Z"}}},
		{[]string{"3"}, url.Values{"id": {"3"}}}, // ids: whoever's
		{[]string{"-u", "all", "-A", "phys,chem", "-p", "gpu", "-s", "failed", "-s", "TIMEOUT"}, url.Values{"account": {"phys", "chem"},
			"partition": {"gpu"}, "state": {"FAILED", "TIMEOUT"}}},
		{[]string{"-u", "all", "--since", "2026-11-01T00:00:00Z", "--until", "2026-11-02T00:00:00Z"}, url.Values{
			"ended_from": {"2026-11-01T00:00:00Z"}, "ended_to": {"2026-11-02T00:00:00Z"}}},
	}
	for _, tt := range tests {
		s, qs := histSchedd(t)
		code, _, errs := runBhist(append(tt.args, "--addr", s.Addr)...)
		if code != 0 || len(*qs) != 1 || (*qs)[0].Encode() != tt.want.Encode() {
			t.Errorf("%q: exit %d, stderr %q, queries %v, want %v", tt.args, code, errs, *qs, tt.want)
		}
	}
}

func TestOutput(t *testing.T) {
	s, _ := histSchedd(t)
	code, out, errs := runBhist("-u", "all", "--addr", s.Addr)
	if code != 0 || errs != "" || !strings.HasPrefix(out, "JOBID  USER ") || strings.Count(out, "\n") != 4 {
		t.Errorf("table: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	code, out, errs = runBhist("-l", "7", "99", "--addr", s.Addr)
	if code != 1 || !strings.HasPrefix(out, "Job 7: bad name\n") || strings.Contains(out, "Job 3") ||
		errs != "bhist: job 99: no history: not ended, unknown, or outside -S/-C\n" {
		t.Errorf("-l 7 99: exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	if !strings.Contains(out, "ended      FAILED, exit code 3: sub1: exec failed") {
		t.Errorf("-l without the timeline:\n%s", out)
	}
	code, out, _ = runBhist("-o", "json", "3", "--addr", s.Addr)
	var got []api.HistoryJob
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got) != 1 || got[0].CPUTime != 52*time.Minute+30*time.Second {
		t.Errorf("json: exit %d, %v, %+v", code, err, got)
	}
	code, out, _ = runBhist("-u", "nobody", "--addr", s.Addr)
	if code != 0 || !strings.HasPrefix(out, "JOBID") {
		t.Errorf("empty: %d %q", code, out)
	}
}

func TestArgs(t *testing.T) {
	s, qs := histSchedd(t)
	for _, tt := range []struct {
		args []string
		errs string
	}{
		{[]string{"x"}, `bhist: invalid job id "x": want a number such as 42, or an array element such as 42[5]`},
		{[]string{"-n", "-1"}, "bhist: -n -1: want a number ≥ 0"},
		{[]string{"-l", "-o", "json"}, "bhist: -l is the long table; -o json already holds everything"},
		{[]string{"-S", "yesterday"}, `bhist: -S yesterday: "yesterday" is not a time: use 2026-11-22, 2026-11-22T15:04, 2026/11/22/15:04, RFC 3339 or a duration ago such as 2h`},
		{[]string{"-C", "2026-11-02,2026-11-01"}, "bhist: -C 2026-11-02,2026-11-01: the range ends before it begins"},
		{[]string{"-s", "RUNNING"}, "bhist: -s RUNNING: want COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, PREEMPTED or REQUEUED"},
		{[]string{"-C", "2h", "--since", "1h"}, "bhist: -C and --since/--until both bound the end time: give one of them"},
		{[]string{"--since", "2026-11-02", "--until", "2026-11-01"}, "bhist: --until is before --since"},
		{[]string{"--until", "later"}, `bhist: --until later: "later" is not a time: use 2026-11-22, 2026-11-22T15:04, 2026/11/22/15:04, RFC 3339 or a duration ago such as 2h`},
	} {
		code, out, errs := runBhist(append(tt.args, "--addr", s.Addr)...)
		if code != 2 || out != "" || errs != tt.errs+"\nRun 'bhist -h' for usage.\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tt.args, code, out, errs)
		}
	}
	if len(*qs) != 0 {
		t.Errorf("bad arguments reached schedd: %v", *qs)
	}
}

// LSF's bhist -a: jobs in every state, the unfinished after the ended;
// -u all: every user's. A filter on the end (-C, --since, -s) keeps to
// ended jobs.
func TestAllStates(t *testing.T) {
	s, _ := histSchedd(t)
	code, out, errs := runBhist("-a", "-u", "all", "--addr", s.Addr)
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		ids = append(ids, strings.Fields(l)[0])
	}
	if code != 0 || errs != "" || strings.Join(ids, " ") != "3 9 7 12 15 16" || !strings.Contains(out, " RUNNING ") || !strings.Contains(out, " HELD ") {
		t.Errorf("-a -u all: exit %d, stderr %q, rows %q:\n%s", code, errs, ids, out)
	}
	code, out, _ = runBhist("-a", "-u", "all", "-s", "FAILED", "--addr", s.Addr)
	if code != 0 || strings.Contains(out, "RUNNING") {
		t.Errorf("-a -s FAILED shows unfinished jobs:\n%s", out)
	}
	code, out, _ = runBhist("-a", "-l", "12", "--addr", s.Addr)
	if code != 0 || !strings.HasPrefix(out, "Job 12: train\n") || !strings.Contains(out, "State:     RUNNING") || !strings.HasSuffix(out, "started    on node01, node02\n") {
		t.Errorf("-a -l 12: exit %d:\n%s", code, out)
	}
}
