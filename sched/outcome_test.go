package sched

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// TestControlRequestIDOnce: hold, release and kill sent twice with one
// request id (a client re-sending after a lost answer) answer 200 both
// times, the job changed once; without the id the repeat is refused as
// before.
func TestControlRequestIDOnce(t *testing.T) {
	srv, c := cluster(t)
	ctx := context.Background()
	res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1))})
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
