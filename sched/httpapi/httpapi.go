package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/sched/fault"
)

// AppsPrefix is where schedd serves the jobs' services:
// /apps/JOB/SERVICE/… goes to the service's port in main1.
const AppsPrefix = "/apps/"

// Anonymous is who a caller of the read-only API (ReadOnly) is: nobody
// in particular, no admin, owner of no job.
var Anonymous = auth.Identity{UID: -1, GID: -1, User: "anonymous"}

// API serves schedd's HTTP API from a Controller.
type API struct {
	c   Controller
	log *slog.Logger
}

// New is the API of c; log takes what goes wrong with an answer
// already under way (nil: slog's default).
func New(c Controller, log *slog.Logger) *API {
	if log == nil {
		log = slog.Default()
	}
	return &API{c: c, log: log}
}

// Handler serves the /v1 API (see internal/api for the endpoints and
// sched/openapi/openapi.json for their document), the routes of the
// route table, and the jobs' services under AppsPrefix. The caller's
// identity, if any, is already in the request's context (the unix
// socket's peer credentials; TCP adds a bearer token's).
func (a *API) Handler() http.Handler {
	m := a.Mux()
	// A job's web services (apps.go): not part of the /v1 API, so not in
	// its route table or OpenAPI document.
	app := guard(Owner, a.app)
	m.HandleFunc(AppsPrefix+"{id}/{service}/{rest...}", app)
	m.HandleFunc(AppsPrefix+"{id}/{service}", app)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(api.RequestHeader); id != "" && r.Method == http.MethodPost {
			r = r.WithContext(WithRequestID(r.Context(), id))
		}
		m.ServeHTTP(w, r)
	})
}

type requestIDKey struct{}

// WithRequestID carries a write's request id (api.RequestHeader) to the
// command it becomes: kill, hold, release and signal are applied once
// per id (sched's state.Request).
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the request id ctx carries ("" none).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// TCP is the API for a TCP listener: every request must carry a bearer
// token (Authorization: Bearer …), which becomes the caller's identity
// (Controller.Identify) under the same rules as the unix socket's peer
// credentials (authorize):
//
//   - a user token (badmin token create) is its owner, admin if issued so;
//   - the cluster's join token may only POST /v1/nodes/register, which
//     answers the node's own credential;
//   - a node credential acts only for its node (/v1/nodes/NAME/…).
//
// An unknown or revoked token is refused with 401. trustAnonymous (the
// dev-only schedd --insecure-tcp) lets requests without a token through
// as trusted, as the unix socket's root would be. A follower sends what
// it must not serve itself to the leader (redirectToLeader).
func (a *API) TCP(trustAnonymous bool) http.Handler {
	h := a.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.redirectToLeader(w, r) {
			return
		}
		secret := auth.Bearer(r)
		if secret == "" {
			if trustAnonymous {
				h.ServeHTTP(w, r)
				return
			}
			writeErr(w, fmt.Errorf("%w: schedd over TCP needs a bearer token: set TROUPE_TOKEN or write one to ~/.troupe/token (badmin token create issues them)", fault.ErrUnauthenticated))
			return
		}
		id, err := a.c.Identify(secret)
		if err != nil {
			if errors.Is(err, fault.ErrUnauthenticated) && a.leaderChecksToken(w, r) {
				return
			}
			writeErr(w, err)
			return
		}
		h.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), id)))
	})
}

// ReadOnly serves the part of the /v1 API that only reads, for a
// listener's callers who did not authenticate (schedd --web-addr before
// someone logs in; sched/web): the routes the table marks Public (GET
// of the jobs, one job, the nodes, the partitions and the fair-share
// tree), with blocking queries (?index=N&wait=D, the X-Troupe-Index
// header). Every caller is Anonymous, so other users' jobs come
// redacted as visible does for them. Any other method is refused (405)
// and any other path (tokens, snapshots, node endpoints, reconfig) is
// not found (404).
//
// It answers from this server's own replica, leader or not.
func (a *API) ReadOnly() http.Handler {
	m := http.NewServeMux()
	for _, rt := range routes {
		if rt.Public {
			m.HandleFunc(rt.Method+" "+rt.Path, guard(rt.Rule, a.bind(rt.handle)))
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSONErr(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: this listener is read-only (GET only)", r.Method, r.URL.Path))
			return
		}
		if _, pattern := m.Handler(r); pattern == "" {
			writeJSONErr(w, http.StatusNotFound, fmt.Errorf("GET %s: not served on this read-only listener (jobs, nodes, partitions and fairshare are)", r.URL.Path))
			return
		}
		m.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), Anonymous)))
	})
}

// redirectToLeader answers a request a follower must not serve itself:
// writes, the nodes' endpoints (heartbeats are leader-local), and, while
// it has not yet applied its log up to what it had on disk (a restarted
// or lagging peer), reads too. It answers 307 to the leader's API
// address (as raft knows it), or 503 while none is known; true when it
// answered. A lone server and the leader serve everything.
func (a *API) redirectToLeader(w http.ResponseWriter, r *http.Request) bool {
	l := a.c.Leadership()
	if !l.Multi || l.Leader {
		return false
	}
	if l.CaughtUp && r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/v1/nodes/") && r.URL.Path != "/v1/snapshot" &&
		!strings.HasPrefix(r.URL.Path, AppsPrefix) {
		return false // reads come from this replica's state
	}
	if l.LeaderAPI == "" {
		w.Header().Set("Retry-After", "1")
		if !l.CaughtUp {
			writeErr(w, fmt.Errorf("%w: this peer is still replaying its raft log (applied %d of %d) and knows no leader yet; retry", fault.ErrNotLeader, l.Applied, l.OnDisk))
			return true
		}
		writeErr(w, fmt.Errorf("%w: no leader elected yet; retry", fault.ErrNotLeader))
		return true
	}
	http.Redirect(w, r, strings.TrimRight(l.LeaderAPI, "/")+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	return true
}

// leaderChecksToken sends a request whose token this follower does not
// know to the leader (307), which decides: a token is a write, and one
// just issued on the leader (badmin token create) reaches a follower's
// replica a moment later; the caller who got it from another process
// carries no index to wait for. The leader refuses a token that is truly
// unknown or revoked as any peer would. False when this server is the
// leader, alone, or knows none.
func (a *API) leaderChecksToken(w http.ResponseWriter, r *http.Request) bool {
	l := a.c.Leadership()
	if !l.Multi || l.Leader || l.LeaderAPI == "" {
		return false
	}
	http.Redirect(w, r, strings.TrimRight(l.LeaderAPI, "/")+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	return true
}

// CatchUpGate guards a handler that serves from this replica's state
// without a redirect (the unix socket: its callers' identity does not
// travel to the leader): until the peer has applied its log up to what
// it had on disk, reads are answered 503 with Retry-After (never an
// empty or old queue); writes go through (raft sends them to the leader
// or refuses them).
func (a *API) CatchUpGate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			if l := a.c.Leadership(); l.Multi && !l.CaughtUp {
				w.Header().Set("Retry-After", "1")
				err := fmt.Errorf("%w: this peer is still replaying its raft log (applied %d of %d); retry", fault.ErrNotLeader, l.Applied, l.OnDisk)
				if l.LeaderAPI != "" {
					err = fmt.Errorf("%w; the leader serves at %s", err, l.LeaderAPI)
				}
				writeErr(w, err)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
