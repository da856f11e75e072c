package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func runBjob(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func jobSchedd(t *testing.T) *clitest.Schedd {
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		for _, j := range clitest.Jobs() {
			if r.PathValue("id") == jsonNumber(j.ID) {
				clitest.JSON(w, http.StatusOK, 50, j)
				return
			}
		}
		clitest.Error(w, http.StatusNotFound, "no such job")
	})
	// The accounting store holds element 50[3] (job 53), as schedd
	// filters it: by the element asked for.
	s.Handle("GET /v1/history", func(w http.ResponseWriter, r *http.Request) {
		var out []api.HistoryJob
		if r.URL.Query().Get("id") == "50[3]" {
			h := clitest.History()[0]
			h.ID, h.ArrayID, h.ArrayIndex, h.Name = 53, 50, 3, "sweep"
			out = append(out, h)
		}
		clitest.JSON(w, http.StatusOK, 50, api.History{Jobs: out, Index: 50})
	})
	return s
}

func jsonNumber(id uint64) string { b, _ := json.Marshal(id); return string(b) }

func TestShow(t *testing.T) {
	s := jobSchedd(t)
	code, out, errs := runBjob("--addr", s.Addr, "12")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"Job 12: train", "State:", "RUNNING", "Session:", "00000000-0000-4000-8000-120000000000",
		"HOST   ROLE  NODE    ADDR       STATE    EXIT  KERNEL_ID", "sub3   sub   node02  10.64.0.5  running  -"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestJSON(t *testing.T) {
	s := jobSchedd(t)
	code, out, errs := runBjob("-o", "json", "--addr", s.Addr, "7")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var j api.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	if j.ID != 7 || j.State != api.JobFailed || j.ExitCode != 3 {
		t.Errorf("job %+v", j)
	}
}

func TestNotFound(t *testing.T) {
	s := jobSchedd(t)
	code, out, errs := runBjob("--addr", s.Addr, "99")
	if code != 1 || out != "" || errs != "bjob: job 99: not found\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestUnreachable(t *testing.T) {
	addr := clitest.Unreachable(t)
	code, out, errs := runBjob("--addr", addr, "1")
	want := "bjob: cannot reach schedd at " + addr + ": connect: no such file or directory\n"
	if code != 1 || out != "" || errs != want {
		t.Errorf("exit %d, stdout %q, stderr %q, want %q", code, out, errs, want)
	}
}

func TestArgs(t *testing.T) {
	tests := []struct {
		args []string
		errs string
	}{
		{nil, "bjob: missing job id"},
		{[]string{"1", "2"}, "bjob: one job id at a time (bqueue lists many)"},
		{[]string{"x1"}, `bjob: invalid job id "x1": want a number such as 42, or an array element such as 42[5]`},
		{[]string{"-l", "1"}, "bjob: flag provided but not defined: -l"},
	}
	for _, tt := range tests {
		code, out, errs := runBjob(tt.args...)
		if code != 2 || out != "" || errs != tt.errs+"\nRun 'bjob -h' for usage.\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tt.args, code, out, errs)
		}
	}
}

func TestHelp(t *testing.T) {
	code, out, errs := runBjob("--help")
	if code != 0 || errs != "" || !strings.Contains(out, "Usage: bjob [flags] JOBID") || !strings.Contains(out, "bjob 42") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
}

// bjob -o json prints what the golden file holds.
func TestJSONGolden(t *testing.T) {
	s := jobSchedd(t)
	_, out, _ := runBjob("--addr", s.Addr, "-o", "json", "12")
	if want := clitest.Golden(t, "job.json.golden"); out != want {
		t.Errorf("got\n%s\nwant testdata/cli/job.json.golden", out)
	}
}

// TestFromStore: an element (or job) that has left schedd's state is
// shown from its record in the accounting store, asked for alone.
func TestFromStore(t *testing.T) {
	s := jobSchedd(t)
	code, out, errs := runBjob("--addr", s.Addr, "50[3]")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if !strings.Contains(out, "Job 50[3]: sweep") {
		t.Errorf("output lacks the stored element:\n%s", out)
	}
	code, out, _ = runBjob("--addr", s.Addr, "-o", "json", "50[3]")
	var j api.Job
	if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil || j.ID != 53 || j.ArrayIndex != 3 {
		t.Errorf("exit %d, job %+v (%v)", code, j, err)
	}
}
