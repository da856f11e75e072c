package sched

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/raftlog"
)

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
		{fmt.Errorf("%w: node is not the leader", raftlog.ErrNotLeader), http.StatusServiceUnavailable, api.OutcomeNotApplied, true},
		{fmt.Errorf("%w: leadership lost while committing log", raftlog.ErrUnknownOutcome), http.StatusGatewayTimeout, api.OutcomeUnknown, false},
	} {
		w := httptest.NewRecorder()
		writeErr(w, tc.err)
		if w.Code != tc.code || w.Header().Get(api.OutcomeHeader) != tc.outcome || (w.Header().Get("Retry-After") != "") != tc.retry {
			t.Errorf("%v: %d %q Retry-After %q, want %d %q", tc.err, w.Code, w.Header().Get(api.OutcomeHeader), w.Header().Get("Retry-After"), tc.code, tc.outcome)
		}
	}
}

// TestControlRequestIDOnce: hold, release and kill sent twice with one
// request id (a client re-sending after a lost answer) answer 200 both
// times, the job changed once; without the id the repeat is refused as
// before.
func TestControlRequestIDOnce(t *testing.T) {
	srv, c := cluster(t)
	ctx := context.Background()
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: spec(1, "single-node", 1)})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	post := func(path, id string) int {
		r := httptest.NewRequest(http.MethodPost, fmt.Sprintf(path, res.JobID), bytes.NewReader([]byte("{}")))
		if id != "" {
			r.Header.Set(api.RequestHeader, id)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, step := range []struct{ path, id string }{
		{"/v1/jobs/%d/hold", "h1"}, {"/v1/jobs/%d/hold", "h1"},
		{"/v1/jobs/%d/release", "r1"}, {"/v1/jobs/%d/release", "r1"},
		{"/v1/jobs/%d/kill", "k1"}, {"/v1/jobs/%d/kill", "k1"},
	} {
		if code := post(step.path, step.id); code != http.StatusOK {
			t.Fatalf("%s with request id %s: %d, want 200", fmt.Sprintf(step.path, res.JobID), step.id, code)
		}
	}
	if code := post("/v1/jobs/%d/kill", ""); code != http.StatusConflict {
		t.Fatalf("a second kill without a request id: %d, want 409", code)
	}
	if j := srv.st.Snapshot().Job(res.JobID); j.State != api.JobCancelled {
		t.Fatalf("job is %s, want CANCELLED", j.State)
	}
}
