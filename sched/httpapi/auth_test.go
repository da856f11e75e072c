package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/sched/fault"
)

// TestAuthorize: who may call a route of each rule, decided by
// authorize alone: trusted callers (no identity) everything; the join
// token only registers; a node's credential acts only for its node;
// admins everything else.
func TestAuthorize(t *testing.T) {
	alice := auth.Identity{UID: 1000, GID: 1000, User: "alice"}
	admin := auth.Identity{UID: 0, GID: 0, User: "root", Admin: true}
	join := auth.Identity{UID: -1, GID: -1, User: "join-token", Join: true}
	n1 := auth.Identity{UID: -1, GID: -1, User: "node/n1", Node: "n1"}
	type who struct {
		name string
		id   *auth.Identity
	}
	callers := []who{{"trusted", nil}, {"alice", &alice}, {"admin", &admin}, {"join", &join}, {"n1", &n1}}
	// allowed[rule] lists who may, acting for node n1.
	allowed := map[Rule][]string{
		Anyone:    {"trusted", "alice", "admin"},
		Owner:     {"trusted", "alice", "admin"}, // the controller then checks the job's owner
		NodeOnly:  {"trusted", "admin", "n1"},
		Register:  {"trusted", "admin", "join", "n1"},
		AdminOnly: {"trusted", "admin"},
	}
	for rule, may := range allowed {
		for _, c := range callers {
			r := httptest.NewRequest("POST", "/v1/x", nil)
			if c.id != nil {
				r = r.WithContext(auth.WithIdentity(r.Context(), *c.id))
			}
			err := authorize(r, rule, "n1")
			want := strings.Contains(" "+strings.Join(may, " ")+" ", " "+c.name+" ")
			if (err == nil) != want || (err != nil && !errors.Is(err, fault.ErrForbidden)) {
				t.Errorf("rule %d, caller %s: %v, want allowed %v", rule, c.name, err, want)
			}
		}
	}
	// Another node's credential acts neither at n1's routes nor registers n1.
	n2 := auth.Identity{UID: -1, GID: -1, User: "node/n2", Node: "n2"}
	for _, rule := range []Rule{NodeOnly, Register} {
		r := httptest.NewRequest("POST", "/v1/nodes/n1/status", nil)
		r = r.WithContext(auth.WithIdentity(r.Context(), n2))
		if err := authorize(r, rule, "n1"); !errors.Is(err, fault.ErrForbidden) {
			t.Errorf("node n2 at n1's rule %d: %v", rule, err)
		}
	}
}

// TestRouteRules: the route table gives the node endpoints to nodes,
// schedd's own administration to admins, and the read-only listener
// only GETs of anyone's routes.
func TestRouteRules(t *testing.T) {
	admin := map[string]bool{"POST /v1/nodes/drain": true, "POST /v1/raft/join": true, "POST /v1/reconfig": true,
		"GET /v1/snapshot": true, "POST /v1/snapshot": true,
		"POST /v1/reservations": true, "POST /v1/reservations/{name}": true, "POST /v1/reservations/{name}/delete": true,
		"POST /v1/jobs/{id}/suspend": true, "POST /v1/jobs/{id}/resume": true} // suspending a job lends its resources: admins only, as scontrol suspend
	owner := map[string]bool{"POST /v1/jobs/{id}/kill": true, "POST /v1/jobs/{id}/hold": true, "POST /v1/jobs/{id}/release": true,
		"POST /v1/jobs/{id}/attach": true, "POST /v1/jobs/{id}/signal": true}
	for _, rt := range Routes() {
		key := rt.Method + " " + rt.Path
		want := Anyone
		switch {
		case admin[key]:
			want = AdminOnly
		case owner[key]:
			want = Owner
		case strings.HasPrefix(rt.Path, "/v1/nodes/{name}/"):
			want = NodeOnly
		case key == "POST /v1/nodes/register":
			want = Register
		}
		if rt.Rule != want {
			t.Errorf("%s: rule %d, want %d", key, rt.Rule, want)
		}
		if rt.Public && (rt.Method != http.MethodGet || rt.Rule != Anyone) {
			t.Errorf("%s: served on the read-only listener, which serves only GETs anyone may make", key)
		}
	}
}
