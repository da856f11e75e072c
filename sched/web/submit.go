package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/user"
	"path"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// Submit is POST /submit's body: a job file as the page read it.
type Submit struct {
	// Name is the file's name ("job.hcl"): it names the file in
	// messages, and a name ending in .json is read as HCL's JSON syntax.
	Name   string `json:"name"`
	Source string `json:"source"`
	// Interactive runs main1's command (a shell when the file names
	// none) on a terminal the page attaches to, as bsub -I does.
	Interactive bool `json:"interactive,omitempty"`
	// Hold submits the job held (bsub -H).
	Hold bool `json:"hold,omitempty"`
	// RequestID makes a retried submission the same one (api.SubmitRequest).
	RequestID string `json:"request_id,omitempty"`
}

// maxJobFile bounds a job file sent from the page.
const maxJobFile = 1 << 20

// interactiveShell is main1's command in an interactive job whose file
// names none, as bsub -I gives it.
var interactiveShell = []string{"/bin/sh"}

// submit parses the job file as bsub does and submits it through the
// API's POST /v1/jobs as the session's user, who submits it from their
// home directory on schedd's machine (relative output paths resolve
// there). Errors in the file come back as "name:line:col: …", one a line;
// schedd's refusals (sched/admission, as for bsub) as the API's error
// body, its problems placed in the file the same way.
func (p *page) submit(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	var in Submit
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 2*maxJobFile))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		httpError(w, http.StatusBadRequest, fmt.Errorf("POST /submit: request body: %v", err))
		return
	}
	name := path.Base(strings.ReplaceAll(strings.TrimSpace(in.Name), "\\", "/"))
	if name == "" || name == "." || name == "/" {
		name = "job.hcl"
	}
	switch {
	case strings.TrimSpace(in.Source) == "":
		httpError(w, http.StatusBadRequest, fmt.Errorf("%s: the job file is empty", name))
		return
	case len(in.Source) > maxJobFile:
		httpError(w, http.StatusBadRequest, fmt.Errorf("%s: %d bytes; a job file sent from the page may have %d", name, len(in.Source), maxJobFile))
		return
	}
	spec, diags := jobspec.ParseWith(name, []byte(in.Source), jobspec.Options{Interactive: in.Interactive})
	if diags.HasErrors() || spec == nil {
		var msgs []string
		for _, d := range diags {
			msgs = append(msgs, jobspec.FormatDiagnostic(d))
		}
		if len(msgs) == 0 {
			msgs = []string{name + ": no job in file"}
		}
		httpError(w, http.StatusBadRequest, errors.New(strings.Join(msgs, "\n")))
		return
	}
	if in.Interactive && len(spec.MainCommand()) == 0 {
		spec.SetMainCommand(interactiveShell)
	}
	home, err := homeDir(id)
	if err != nil {
		httpError(w, http.StatusBadRequest, err)
		return
	}
	// The positions of this parse go along, as bsub sends its own:
	// schedd's refusals (a partition's limits) then name the file's
	// line and column too.
	body, err := json.Marshal(api.SubmitRequest{Spec: wire.ToAPI(*spec), Cwd: home, Source: name, Hold: in.Hold,
		Interactive: in.Interactive, RequestID: in.RequestID, Positions: wire.PositionsOf(spec)})
	if err != nil {
		httpError(w, http.StatusInternalServerError, err)
		return
	}
	// The same endpoint bsub calls, as the same user: its checks
	// (partition, limits, the caller's uid) decide.
	sub := r.Clone(auth.WithIdentity(r.Context(), id))
	sub.URL.Path, sub.URL.RawQuery, sub.RequestURI = "/v1/jobs", "", ""
	sub.Body, sub.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	sub.Header.Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	p.full.ServeHTTP(w, sub)
}

// homeDir is the user's home directory on schedd's machine: the page's
// submissions come from there.
func homeDir(id auth.Identity) (string, error) {
	u, err := user.LookupId(strconv.Itoa(id.UID))
	if err != nil || u.HomeDir == "" {
		return "", fmt.Errorf("user %s (uid %d) has no home directory on schedd's machine to submit from; submit with bsub from a directory of yours", id.User, id.UID)
	}
	return u.HomeDir, nil
}
