package sched

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/sched/state"
)

// ErrForbidden marks a request its caller may not make (HTTP 403).
var ErrForbidden = errors.New("permission denied")

// Who may do what (DESIGN.md, security). Callers with an identity (the
// unix socket's peer credentials) are checked; a request without one
// came over a listener that does not authenticate and is trusted.
//
//	submit                  anyone; the job runs as the caller's uid/gid
//	list / show jobs        anyone; others' jobs come redacted
//	kill, hold, release     the job's owner, or an admin
//	attach, /apps services  the job's owner, or an admin
//	nodes' endpoints        admins (nodelets run as root)
//	drain, resume nodes     admins
//	reconfig, snapshots     admins

// caller returns the request's identity, if any.
func caller(ctx context.Context) (auth.Identity, bool) { return auth.FromContext(ctx) }

// adminOnly wraps h so that only admins (or unauthenticated, trusted
// listeners) reach it.
func adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id, ok := caller(r.Context()); ok && !id.Admin {
			writeErr(w, fmt.Errorf("%w: %s %s is for administrators (root or the admin group); you are %s (uid %d)",
				ErrForbidden, r.Method, r.URL.Path, id.User, id.UID))
			return
		}
		h(w, r)
	}
}

// mayControl says whether the caller may kill (hold, …) j.
func mayControl(ctx context.Context, j *state.Job) error {
	id, ok := caller(ctx)
	if !ok || id.Admin || id.UID == j.UID {
		return nil
	}
	return fmt.Errorf("%w: job %d belongs to %s; you (%s) may control only your own jobs", ErrForbidden, j.ID, j.User, id.User)
}

// visible is j as the caller may see it: in full when it is theirs (or
// the caller is an admin or trusted), else its public view (api.Job.Public,
// an allow-list).
func visible(ctx context.Context, j api.Job) api.Job {
	id, ok := caller(ctx)
	if !ok || id.Admin || (id.UID >= 0 && id.UID == j.UID) { // uid -1: Anonymous, owner of nothing
		return j
	}
	return j.Public()
}

// asCaller fills the submission's identity from the caller's: the body's
// uid, gid and user are ignored.
func asCaller(ctx context.Context, req *api.SubmitRequest) {
	if id, ok := caller(ctx); ok {
		req.UID, req.GID, req.User = id.UID, id.GID, id.User
	}
}
