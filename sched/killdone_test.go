package sched

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// TestKillDoneHTTP: POST /v1/jobs/N/kill?done=true (bkill -d) ends the job
// COMPLETED; only its owner may, as for a plain kill.
func TestKillDoneHTTP(t *testing.T) {
	srv, _ := cluster(t)
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	bob := auth.Identity{UID: 1002, GID: 1002, User: "bob"}
	var res api.SubmitResponse
	code, body := as(srv, alice, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1))})
	if code != http.StatusCreated || json.Unmarshal(body, &res) != nil {
		t.Fatalf("submit: %d %s", code, body)
	}
	path := "/v1/jobs/" + jsonNum(res.JobID) + "/kill?done=true"
	if code, _ := as(srv, bob, "POST", path, struct{}{}); code != http.StatusForbidden {
		t.Fatalf("bob kills alice's job with -d: %d", code)
	}
	if code, body := as(srv, alice, "POST", path, struct{}{}); code != http.StatusOK {
		t.Fatalf("alice: %d %s", code, body)
	}
	if j := srv.Store().Snapshot().Job(res.JobID); j.State != api.JobCompleted {
		t.Fatalf("state %s, want COMPLETED", j.State)
	}
}
