package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/connlimit"
	"github.com/troupe-hpc/troupe/sched/fault"
)

// Who may call a route (docs/security.md, docs/api.md). Callers with an identity
// (the unix socket's peer credentials, a bearer token over TCP) are
// checked; a request without one came over a listener that does not
// authenticate (the unix socket's root, schedd --insecure-tcp) and is
// trusted. authorize decides, from the route table's rule, for every
// route; the controller decides only what depends on the data: whether
// the caller owns the job (sched's mayControl), or the token.
//
//	submit                  anyone; the job runs as the caller's uid/gid
//	list / show jobs        anyone; others' jobs come redacted (visible)
//	kill, hold, release     the job's owner, or an admin (Owner)
//	attach, signal, /apps   the job's owner, or an admin (Owner)
//	nodes' endpoints        that node's credential, or admins (NodeOnly)
//	register a node         the join token, that node's credential, admins (Register)
//	drain, reconfig,
//	raft join, snapshots    admins (AdminOnly)
//
// Whatever the rule, the join token only registers nodes and a node's
// credential acts only for its node.
type Rule int

// The rules of the route table.
const (
	// Anyone authenticated (and any trusted caller).
	Anyone Rule = iota
	// Owner: anyone may ask; the controller lets only the job's owner
	// or an admin through (fault.ErrForbidden).
	Owner
	// NodeOnly: the node the path's {name} names, or an admin.
	NodeOnly
	// Register: the join token, the credential of the node the body
	// names, or an admin (checked once the body is read).
	Register
	// AdminOnly: administrators (root or the admin group, an admin token).
	AdminOnly
)

// authorize says whether the caller of r may call a route of rule; node
// is the node the request acts for (the path's {name}, the body's name
// for Register).
func authorize(r *http.Request, rule Rule, node string) error {
	id, ok := auth.FromContext(r.Context())
	if !ok {
		return nil // trusted listener
	}
	switch {
	case id.Join && rule != Register:
		return fmt.Errorf("%w: the join token only registers nodes (POST /v1/nodes/register)", fault.ErrForbidden)
	case id.Node != "" && rule != Register && !(rule == NodeOnly && node == id.Node):
		return fmt.Errorf("%w: the credential of node %s acts only for that node, not at %s", fault.ErrForbidden, id.Node, r.URL.Path)
	}
	switch rule {
	case AdminOnly:
		if !id.Admin {
			return fmt.Errorf("%w: %s %s is for administrators (root or the admin group); you are %s (uid %d)",
				fault.ErrForbidden, r.Method, r.URL.Path, id.User, id.UID)
		}
	case NodeOnly:
		if !id.Admin && id.Node != node {
			who := id.User
			if id.Node == "" {
				who = fmt.Sprintf("%s (uid %d)", id.User, id.UID)
			}
			return fmt.Errorf("%w: %s %s is for node %s (or administrators); you are %s",
				fault.ErrForbidden, r.Method, r.URL.Path, node, who)
		}
	case Register:
		if !id.Admin && !id.Join && (id.Node == "" || id.Node != node) {
			return fmt.Errorf("%w: registering node %q needs the cluster's join token, that node's credential, or an administrator; you are %s",
				fault.ErrForbidden, node, id.User)
		}
	}
	return nil
}

// guard wraps h with its route's rule (Register is checked by its
// handler, which reads the name from the body).
func guard(rule Rule, h http.HandlerFunc) http.HandlerFunc {
	if rule == Register {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if err := authorize(r, rule, r.PathValue("name")); err != nil {
			writeErr(w, err)
			return
		}
		if rule == NodeOnly {
			// The connection carries a node's traffic: schedd keeps
			// open files for it (ConnGuard).
			connlimit.MarkNode(r.Context())
		}
		h(w, r)
	}
}

// owns says whether the caller sees uid's jobs in full: their owner, an
// admin or a trusted caller (uid -1 is Anonymous, owner of nothing).
func owns(ctx context.Context, uid int) bool {
	id, ok := auth.FromContext(ctx)
	return !ok || id.Admin || (id.UID >= 0 && id.UID == uid)
}

// visible is j as the caller may see it: in full when it is theirs (or
// the caller is an admin or trusted), else its public view (api.Job.Public,
// an allow-list).
func visible(ctx context.Context, j api.Job) api.Job {
	if owns(ctx, j.UID) {
		return j
	}
	return j.Public()
}

// visibleHistory is h as the caller may see it: whole for its owner and
// admins, else its public record (api.HistoryJob.Public).
func visibleHistory(ctx context.Context, h api.HistoryJob) api.HistoryJob {
	if owns(ctx, h.UID) {
		return h
	}
	return h.Public()
}

// asCaller fills the submission's identity from the caller's: the body's
// uid, gid and user are ignored.
func asCaller(ctx context.Context, req *api.SubmitRequest) {
	if id, ok := auth.FromContext(ctx); ok {
		req.UID, req.GID, req.User, req.Admin = id.UID, id.GID, id.User, id.Admin
	}
}

// by is the name of who asks (a drain's author): "" when trusted.
func by(ctx context.Context) string {
	if id, ok := auth.FromContext(ctx); ok {
		return id.User
	}
	return ""
}
