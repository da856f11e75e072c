package main

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/cli/clitest"
)

func runBattach(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestArgs(t *testing.T) {
	for _, tt := range []struct {
		args []string
		errs string
	}{
		{nil, "battach: missing job id"},
		{[]string{"1", "2"}, "battach: one job id at a time (bqueue lists many)"},
		{[]string{"x1"}, `battach: invalid job id "x1": want a number such as 42`},
	} {
		code, out, errs := runBattach(tt.args...)
		if code != 2 || out != "" || errs != tt.errs+"\nRun 'battach -h' for usage.\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tt.args, code, out, errs)
		}
	}
}

// TestRefusals: a batch job has no terminal, and an ended one no longer
// has one; each is one line and exit 1, without attaching.
func TestRefusals(t *testing.T) {
	jobs := map[string]api.Job{}
	for _, j := range clitest.Jobs() {
		jobs[strconv.FormatUint(j.ID, 10)] = j
	}
	s := clitest.NewSchedd(t)
	s.Handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if j, ok := jobs[r.PathValue("id")]; ok {
			clitest.JSON(w, http.StatusOK, 50, j)
			return
		}
		clitest.Error(w, http.StatusNotFound, "job "+r.PathValue("id")+": not found")
	})
	s.Handle("POST /v1/jobs/{id}/attach", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("battach tried to attach to job %s", r.PathValue("id"))
		clitest.Error(w, http.StatusConflict, "no")
	})
	var running, ended string
	for id, j := range jobs {
		switch {
		case j.State == api.JobRunning && running == "":
			running = id
		case j.State.Terminal() && ended == "":
			ended = id
		}
	}
	for _, tt := range []struct{ id, want string }{
		{running, "battach: job " + running + " is not interactive (submit it with bsub -I)"},
		{ended, "battach: job " + ended + " ended "},
		{"999", "battach: job 999: not found"},
	} {
		code, _, errs := runBattach("--addr", s.Addr, tt.id)
		if code != 1 || !strings.Contains(errs, tt.want) || strings.Count(errs, "battach:") != 1 {
			t.Errorf("battach %s: exit %d, stderr %q; want 1 and %q", tt.id, code, errs, tt.want)
		}
	}
}
