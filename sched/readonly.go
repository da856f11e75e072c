package sched

import (
	"fmt"
	"net/http"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
)

// Anonymous is who a caller of the read-only API (ReadOnlyHandler) is:
// nobody in particular, no admin, owner of no job.
var Anonymous = auth.Identity{UID: -1, GID: -1, User: "anonymous"}

// ReadOnlyHandler serves the part of the /v1 API that only reads, for a
// listener's callers who did not authenticate (schedd --web-addr before
// someone logs in; sched/web): GET of the
// jobs, one job, the nodes, the partitions and the fair-share tree, with
// blocking queries (?index=N&wait=D, the X-Troupe-Index header). Every
// caller is Anonymous, so other users' jobs come redacted as visible
// does for them. Any other method is refused (405) and any other path
// (tokens, snapshots, node endpoints, reconfig) is not found (404).
//
// It answers from this server's own replica, leader or not.
func (s *Server) ReadOnlyHandler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /v1/jobs", s.handleJobs)
	m.HandleFunc("GET /v1/jobs/{id}", s.handleJob)
	m.HandleFunc("GET /v1/nodes", s.handleNodes)
	m.HandleFunc("GET /v1/partitions", s.handlePartitions)
	m.HandleFunc("GET /v1/fairshare", s.handleFairShare)
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

func writeJSONErr(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, 0, api.Error{Error: err.Error()})
}
