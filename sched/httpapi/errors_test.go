package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/fault"
)

// A full data dir is answered 507 with the reason, not 503 "not the
// leader" (which clients retry for their whole budget).
func TestDiskFullIs507(t *testing.T) {
	w := httptest.NewRecorder()
	writeErr(w, fmt.Errorf("%w: /var/lib/troupe/schedd/raft: no space left on device", fault.ErrDiskFull))
	if w.Code != http.StatusInsufficientStorage || !strings.Contains(w.Body.String(), "schedd data dir full") {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
}

// TestOutcomeMapping (issue 21 item 1): "not applied" (the write never
// entered the log) and "unknown outcome" (leadership lost while
// committing) are distinct answers; the second used to read as the first,
// and clients re-sent writes that had taken effect.
func TestOutcomeMapping(t *testing.T) {
	for _, tc := range []struct {
		err     error
		code    int
		outcome string
		retry   bool
	}{
		{fmt.Errorf("%w: node is not the leader", fault.ErrNotLeader), http.StatusServiceUnavailable, api.OutcomeNotApplied, true},
		{fmt.Errorf("%w: leadership lost while committing log", fault.ErrUnknownOutcome), http.StatusGatewayTimeout, api.OutcomeUnknown, false},
	} {
		w := httptest.NewRecorder()
		writeErr(w, tc.err)
		if w.Code != tc.code || w.Header().Get(api.OutcomeHeader) != tc.outcome || (w.Header().Get("Retry-After") != "") != tc.retry {
			t.Errorf("%v: %d %q Retry-After %q, want %d %q", tc.err, w.Code, w.Header().Get(api.OutcomeHeader), w.Header().Get("Retry-After"), tc.code, tc.outcome)
		}
	}
}
