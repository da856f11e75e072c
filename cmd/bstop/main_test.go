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

// controlSchedd serves the fixtures' jobs and records what was asked.
func controlSchedd(t *testing.T, signals *[]string) *clitest.Schedd {
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
	s.Handle("POST /v1/jobs/{id}/hold", func(w http.ResponseWriter, r *http.Request) {
		clitest.JSON(w, http.StatusOK, 6, api.Job{State: api.JobHeld})
	})
	s.Handle("POST /v1/jobs/{id}/signal", func(w http.ResponseWriter, r *http.Request) {
		var req api.SignalJob
		_ = json.NewDecoder(r.Body).Decode(&req)
		*signals = append(*signals, r.PathValue("id")+":"+req.Signal+":"+req.Host)
		clitest.JSON(w, http.StatusOK, 6, api.Job{State: api.JobRunning})
	})
	return s
}

func TestStop(t *testing.T) {
	var signals []string
	s := controlSchedd(t, &signals)
	var out, errb bytes.Buffer
	code := run([]string{"--addr", s.Addr, "12", "15", "3", "99"}, strings.NewReader(""), &out, &errb)
	if code != 1 || out.String() != "Job <12> is being stopped\nJob <15> is being stopped\n" {
		t.Errorf("exit %d, stdout %q", code, out.String())
	}
	if want := "bstop: job 3 is COMPLETED (DONE): only pending and running jobs can be stopped\nbstop: job 99: not found\n"; errb.String() != want {
		t.Errorf("stderr %q, want %q", errb.String(), want)
	}
	// The running job gets SIGSTOP in all its containers; the pending one is held.
	if !slices.Equal(signals, []string{"12:STOP:"}) || !slices.Contains(s.Requests(), "POST /v1/jobs/15/hold") {
		t.Errorf("signals %q, requests %q", signals, s.Requests())
	}
}

// bjobs shows a placed job that has not started as RUN, so bstop takes
// it: its containers get SIGSTOP recorded (they start stopped); a held
// job (PSUSP) is already suspended and bstop says so as for any other.
func TestStopPlacedAndHeld(t *testing.T) {
	var signals []string
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		states := map[string]api.JobState{"20": api.JobScheduled, "21": api.JobPreparing, "16": api.JobHeld}
		id, _ := strconv.ParseUint(r.PathValue("id"), 10, 64)
		clitest.JSON(w, http.StatusOK, 6, api.Job{ID: id, State: states[r.PathValue("id")]})
	})
	s.Handle("POST /v1/jobs/{id}/signal", func(w http.ResponseWriter, r *http.Request) {
		var req api.SignalJob
		_ = json.NewDecoder(r.Body).Decode(&req)
		signals = append(signals, r.PathValue("id")+":"+req.Signal+":"+req.Host)
		clitest.JSON(w, http.StatusOK, 6, api.Job{State: api.JobScheduled})
	})
	var out, errb bytes.Buffer
	code := run([]string{"--addr", s.Addr, "20", "21", "16"}, strings.NewReader(""), &out, &errb)
	if code != 0 || out.String() != "Job <20> is being stopped\nJob <21> is being stopped\nJob <16> is being stopped\n" || errb.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if !slices.Equal(signals, []string{"20:STOP:", "21:STOP:"}) || slices.Contains(s.Requests(), "POST /v1/jobs/16/hold") {
		t.Errorf("signals %q, requests %q", signals, s.Requests())
	}
}
