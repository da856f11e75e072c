package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/troupe-hpc/troupe/internal/connlimit"
)

// NodePrefix is where the nodes' endpoints are: registration,
// heartbeats, assignments, reports, attach polls and streams.
const NodePrefix = "/v1/nodes/"

// ConnGuard serves h behind g: while schedd holds so many open files
// that only its reserve for the nodes' traffic is left, a request that
// is not the nodes' (its path is not under NodePrefix, its connection
// never carried a node's request) is refused with 503 and Retry-After,
// and its connection closed. A nil g serves h as it is.
func ConnGuard(g *connlimit.Guard, h http.Handler) http.Handler {
	if g == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.Admit(r.Context(), strings.HasPrefix(r.URL.Path, NodePrefix)); err != nil {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			writeJSONErr(w, http.StatusServiceUnavailable, fmt.Errorf("schedd: %w", err))
			return
		}
		h.ServeHTTP(w, r)
	})
}
