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
	"github.com/troupe-hpc/troupe/jobspec/wire"
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
	code, body := as(srv, alice, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp), UID: 0, GID: 0, User: "root"})
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
	code, body = as(srv, alice, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(spec(1, "single-node", 1))})
	if code != http.StatusCreated || json.Unmarshal(body, &res) != nil {
		t.Fatalf("alice submits again: %d %s", code, body)
	}
	if code, body := as(srv, root, "POST", "/v1/jobs/"+jsonNum(res.JobID)+"/kill", struct{}{}); code != http.StatusOK {
		t.Fatalf("root kills alice's job: %d %s", code, body)
	}
}

func jsonNum(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// TestRedactedViewHidesHandles is issue 19's item 5 as the attacker does
// it: bob reads alice's placed job with bjob -o json (GET /v1/jobs/N and
// the list) and through the unauthenticated web listener. He sees what
// bqueue -u all shows, and none of the handles: request id, session and
// kernel ids, VNI, subnet, container and node addresses, the error file.
func TestRedactedViewHidesHandles(t *testing.T) {
	srv, c := cluster(t)
	register(t, c, "n1", 4)
	alice := auth.Identity{UID: 1001, GID: 1001, User: "alice"}
	bob := auth.Identity{UID: 1002, GID: 1002, User: "bob"}
	sp := spec(2, "single-node", 1)
	sp.Error = "/home/alice/private/err-%j.log"
	code, body := as(srv, alice, "POST", "/v1/jobs", api.SubmitRequest{Spec: wire.ToAPI(sp), RequestID: "req-7f3a9c", Cwd: "/home/alice/proj"})
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, body)
	}
	var res api.SubmitResponse
	_ = json.Unmarshal(body, &res)
	j := waitJob(t, c, res.JobID, func(j api.Job) bool { return j.State == api.JobScheduled && j.Network != nil })
	secrets := []string{"req-7f3a9c", j.SessionID, j.Network.Subnet, `"vni"`, j.Containers[0].Addr, j.Containers[1].KernelID,
		"/home/alice", `"request_id"`, `"addr"`, `"network"`}
	path := "/v1/jobs/" + jsonNum(res.JobID)
	ro := func(p string) []byte {
		w := httptest.NewRecorder()
		srv.ReadOnlyHandler().ServeHTTP(w, httptest.NewRequest("GET", p, nil))
		return w.Body.Bytes()
	}
	_, one := as(srv, bob, "GET", path, nil)
	_, list := as(srv, bob, "GET", "/v1/jobs", nil)
	for what, b := range map[string][]byte{"bjob": one, "bqueue -u all": list, "web job": ro(path), "web jobs": ro("/v1/jobs")} {
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("%s shows bob %q: %s", what, s, b)
			}
		}
		for _, s := range []string{`"user":"alice"`, `"state":"SCHEDULED"`, `"partition":"default"`, `"node":"n1"`, `"host":"sub1"`, `"cpu":1`} {
			if !strings.Contains(string(b), s) {
				t.Errorf("%s lacks %s, which bqueue -u all needs: %s", what, s, b)
			}
		}
	}
	// alice sees her job in full.
	if _, b := as(srv, alice, "GET", path, nil); !strings.Contains(string(b), j.Containers[1].KernelID) || !strings.Contains(string(b), "req-7f3a9c") {
		t.Errorf("alice's own view lacks the handles: %s", b)
	}
}
