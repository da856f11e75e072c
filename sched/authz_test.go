package sched

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
)

// as sends a request to srv's handler as the given peer (what the unix
// socket's ConnContext puts in the context).
func as(srv *Server, id auth.Identity, method, path string, body any) (int, []byte) {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	r := httptest.NewRequest(method, path, bytes.NewReader(b)).WithContext(auth.WithIdentity(context.Background(), id))
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

func TestPeerIdentity(t *testing.T) {
	srv, c := cluster(t)
	register(t, c, "n1", 4)
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	bob := auth.Identity{UID: 1002, GID: 1002, User: "bob"}
	root := auth.Identity{UID: 0, GID: 0, User: "root", Admin: true}

	// alice submits claiming to be root: the job is alice's.
	sp := spec(1, "single-node", 1)
	sp.Env = map[string]string{"SECRET": "s3cr3t"}
	code, body := as(srv, alice, "POST", "/v1/jobs", api.SubmitRequest{Spec: sp, UID: 0, GID: 0, User: "root"})
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, body)
	}
	var res api.SubmitResponse
	_ = json.Unmarshal(body, &res)
	j := srv.Store().Snapshot().Job(res.JobID)
	if j.UID != 1001 || j.GID != 1001 || j.User != "alice" {
		t.Fatalf("job runs as %s %d:%d, want alice 1001:1001", j.User, j.UID, j.GID)
	}
	path := "/v1/jobs/" + jsonNum(res.JobID)

	// bob sees it redacted, alice in full.
	_, body = as(srv, bob, "GET", path, nil)
	if strings.Contains(string(body), "s3cr3t") || strings.Contains(string(body), `"command"`) {
		t.Fatalf("bob sees alice's job in full: %s", body)
	}
	_, body = as(srv, alice, "GET", path, nil)
	if !strings.Contains(string(body), "s3cr3t") {
		t.Fatalf("alice does not see her own job in full: %s", body)
	}
	// bob cannot kill it; nodes' and admin endpoints are closed to him.
	if code, body := as(srv, bob, "POST", path+"/kill", struct{}{}); code != http.StatusForbidden || !strings.Contains(string(body), "only your own jobs") {
		t.Fatalf("bob kills alice's job: %d %s", code, body)
	}
	for _, p := range []string{"/v1/nodes/register", "/v1/nodes/n1/status", "/v1/reconfig", "/v1/snapshot"} {
		if code, _ := as(srv, bob, "POST", p, struct{}{}); code != http.StatusForbidden {
			t.Errorf("bob POST %s: %d, want 403", p, code)
		}
	}
	if j := srv.Store().Snapshot().Job(res.JobID); j.State.Terminal() {
		t.Fatalf("refused kill changed the job: %s", j.State)
	}
	// alice can; so could root.
	if code, body := as(srv, alice, "POST", path+"/kill", struct{}{}); code != http.StatusOK {
		t.Fatalf("alice kills her job: %d %s", code, body)
	}
	code, body = as(srv, alice, "POST", "/v1/jobs", api.SubmitRequest{Spec: spec(1, "single-node", 1)})
	if code != http.StatusCreated || json.Unmarshal(body, &res) != nil {
		t.Fatalf("alice submits again: %d %s", code, body)
	}
	if code, body := as(srv, root, "POST", "/v1/jobs/"+jsonNum(res.JobID)+"/kill", struct{}{}); code != http.StatusOK {
		t.Fatalf("root kills alice's job: %d %s", code, body)
	}
}

func jsonNum(n uint64) string { b, _ := json.Marshal(n); return string(b) }
