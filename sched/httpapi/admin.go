package httpapi

import (
	"fmt"
	"net/http"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/fault"
)

func (a *API) reconfig(w http.ResponseWriter, r *http.Request) {
	var body struct{}
	if r.ContentLength != 0 && !decode(w, r, &body) {
		return
	}
	res, err := a.c.Reconfig(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, res)
}

func (a *API) raftJoin(w http.ResponseWriter, r *http.Request) {
	var req api.RaftJoin
	if !decode(w, r, &req) {
		return
	}
	if err := a.c.JoinPeer(r.Context(), req); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, struct{}{})
}

// snapshotSave streams the snapshot file: SaveSnapshot reads both of
// its sections before it writes a byte, so an error then is answered as
// any other; one while it writes (the client gone) aborts the response,
// which the client sees cut short, never whole.
func (a *API) snapshotSave(w http.ResponseWriter, r *http.Request) {
	sw := &startedWriter{w: w}
	if err := a.c.SaveSnapshot(r.Context(), sw); err != nil {
		if !sw.started {
			writeErr(w, err)
			return
		}
		panic(http.ErrAbortHandler)
	}
}

// startedWriter sets a snapshot file's headers before its first byte.
type startedWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *startedWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", "application/octet-stream")
		s.w.WriteHeader(http.StatusOK)
	}
	return s.w.Write(p)
}

func (a *API) snapshotRestore(w http.ResponseWriter, r *http.Request) {
	var allow bool
	switch v := r.URL.Query().Get("allow_missing_history"); v {
	case "", "false":
	case "true":
		allow = true
	default:
		writeErr(w, fmt.Errorf("%w: allow_missing_history=%q: want true or false", fault.ErrInvalid, v))
		return
	}
	res, err := a.c.RestoreSnapshot(r.Context(), http.MaxBytesReader(w, r.Body, maxSnapshotBody), allow)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, res)
}

func (a *API) tokenCreate(w http.ResponseWriter, r *http.Request) {
	var req api.TokenCreate
	if !decode(w, r, &req) {
		return
	}
	res, err := a.c.CreateToken(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, 0, res)
}

func (a *API) tokens(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, 0, a.c.Tokens(r.Context()))
}

func (a *API) tokenRevoke(w http.ResponseWriter, r *http.Request) {
	if err := a.c.RevokeToken(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, struct{}{})
}
