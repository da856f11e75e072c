package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/admission"
	"github.com/troupe-hpc/troupe/sched/fault"
)

// MaxBody bounds a request's JSON body.
const MaxBody = 4 << 20

// maxSnapshotBody bounds POST /v1/snapshot's body: a snapshot file
// (sched bounds its state at 4 GiB, the accounting section's rows at 8
// GiB) and its two header lines.
const maxSnapshotBody = 12<<30 + 8192

// Status is the HTTP status of err, and the headers it adds: the one
// place the controller's errors (package fault's kinds) become statuses.
func Status(err error, h http.Header) int {
	switch {
	case errors.Is(err, fault.ErrQueueFull): // before Invalid, which it wraps
		return http.StatusTooManyRequests
	case errors.Is(err, fault.ErrTooMany):
		return http.StatusTooManyRequests
	case errors.Is(err, fault.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, fault.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, fault.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, fault.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, fault.ErrEnded), errors.Is(err, fault.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, fault.ErrUnavailable):
		return http.StatusGatewayTimeout
	case errors.Is(err, fault.ErrDiskFull):
		return http.StatusInsufficientStorage
	case errors.Is(err, fault.ErrNotLeader):
		// Not applied: the write never entered the log; an election.
		h.Set("Retry-After", "1")
		h.Set(api.OutcomeHeader, api.OutcomeNotApplied)
		return http.StatusServiceUnavailable
	case errors.Is(err, fault.ErrUnknownOutcome):
		// The entry may still commit under the next leader: clients send
		// the same request id again (idempotent), never a new request.
		h.Set(api.OutcomeHeader, api.OutcomeUnknown)
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// writeErr answers err: its status (Status) and an api.Error, with the
// problems of an admission refusal.
func writeErr(w http.ResponseWriter, err error) {
	code := Status(err, w.Header())
	body := api.Error{Error: err.Error()}
	if r := (*admission.Refusal)(nil); errors.As(err, &r) {
		body.Problems = r.API()
	}
	writeJSON(w, code, 0, body)
}

// writeJSONErr answers err with code, not Status's.
func writeJSONErr(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, 0, api.Error{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, idx uint64, v any) {
	w.Header().Set("Content-Type", "application/json")
	if idx > 0 {
		w.Header().Set(api.IndexHeader, strconv.FormatUint(idx, 10))
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads the request's JSON body into v (unknown fields refused),
// answering the error itself; false when it did.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, fmt.Errorf("%w: request body: %v", fault.ErrInvalid, err))
		return false
	}
	return true
}
