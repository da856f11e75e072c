package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/sched/fault"
)

// tokenPeer is a peer that knows no token, at a place in its cluster;
// every other operation is left out (calling one panics).
type tokenPeer struct {
	Controller
	l Leadership
}

func (p tokenPeer) Identify(string) (auth.Identity, error) {
	return auth.Identity{}, fmt.Errorf("%w: the bearer token is unknown or revoked", fault.ErrUnauthenticated)
}

func (p tokenPeer) Leadership() Leadership { return p.l }

// TestUnknownTokenGoesToLeader: a follower that does not know a token
// (one just issued on the leader, not yet applied here) sends the request
// to the leader, reads included, rather than refusing it; the leader, or
// a peer with no leader to ask, refuses it with 401.
func TestUnknownTokenGoesToLeader(t *testing.T) {
	const leader = "https://s1:9443"
	for _, tc := range []struct {
		name string
		l    Leadership
		code int
	}{
		{"follower", Leadership{Multi: true, CaughtUp: true, LeaderAPI: leader}, http.StatusTemporaryRedirect},
		{"leader", Leadership{Multi: true, Leader: true, CaughtUp: true, LeaderAPI: leader}, http.StatusUnauthorized},
		{"alone", Leadership{Leader: true, CaughtUp: true}, http.StatusUnauthorized},
		{"follower knowing no leader", Leadership{Multi: true, CaughtUp: true}, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := New(tokenPeer{l: tc.l}, nil).TCP(false)
			r := httptest.NewRequest(http.MethodGet, "/v1/jobs/7?index=12", nil)
			r.Header.Set("Authorization", "Bearer fresh-token")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code {
				t.Fatalf("GET with an unknown token: %d %s, want %d", w.Code, w.Body, tc.code)
			}
			if tc.code == http.StatusTemporaryRedirect {
				if loc := w.Header().Get("Location"); loc != leader+"/v1/jobs/7?index=12" {
					t.Errorf("sent to %q, want the leader's same request", loc)
				}
			}
		})
	}
}
