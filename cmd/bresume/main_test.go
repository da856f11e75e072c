package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func TestResume(t *testing.T) {
	var signals []string
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseUint(r.PathValue("id"), 10, 64)
		for _, j := range clitest.Jobs() {
			if j.ID == id {
				clitest.JSON(w, http.StatusOK, 6, j) // a state with the writes below applied
				return
			}
		}
		clitest.Error(w, http.StatusNotFound, "job "+r.PathValue("id")+": not found")
	})
	s.Handle("POST /v1/jobs/{id}/release", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 6, api.Job{State: api.JobPending})
	})
	s.Handle("POST /v1/jobs/{id}/signal", func(w http.ResponseWriter, r *http.Request) {
		var req api.SignalJob
		_ = json.NewDecoder(r.Body).Decode(&req)
		signals = append(signals, r.PathValue("id")+":"+req.Signal)
		clitest.JSON(w, http.StatusOK, 6, api.Job{State: api.JobRunning})
	})
	var out, errb bytes.Buffer
	code := run([]string{"--addr", s.Addr, "12", "16", "15"}, strings.NewReader(""), &out, &errb)
	if code != 1 || out.String() != "Job <12> is being resumed\nJob <16> is being resumed\n" ||
		errb.String() != "bresume: job 15 is PENDING (PEND): only suspended jobs can be resumed\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if !slices.Equal(signals, []string{"12:CONT"}) || !slices.Contains(s.Requests(), "POST /v1/jobs/16/release") {
		t.Errorf("signals %q, requests %q", signals, s.Requests())
	}
}

// A placed job stopped before it started (bjobs: USUSP) is resumed with
// SIGCONT, as a running one.
func TestResumePlaced(t *testing.T) {
	var signals []string
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseUint(r.PathValue("id"), 10, 64)
		clitest.JSON(w, http.StatusOK, 5, api.Job{ID: id, State: api.JobPreparing,
			Signals: []api.SignalRequest{{Seq: 1, Signal: 19}}})
	})
	s.Handle("POST /v1/jobs/{id}/signal", func(w http.ResponseWriter, r *http.Request) {
		var req api.SignalJob
		_ = json.NewDecoder(r.Body).Decode(&req)
		signals = append(signals, r.PathValue("id")+":"+req.Signal)
		clitest.JSON(w, http.StatusOK, 6, api.Job{State: api.JobPreparing})
	})
	var out, errb bytes.Buffer
	if code := run([]string{"--addr", s.Addr, "21"}, strings.NewReader(""), &out, &errb); code != 0 || out.String() != "Job <21> is being resumed\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if !slices.Equal(signals, []string{"21:CONT"}) {
		t.Errorf("signals %q", signals)
	}
}
