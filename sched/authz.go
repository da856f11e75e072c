package sched

import (
	"context"
	"fmt"

	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/sched/fault"
	"github.com/troupe-hpc/troupe/sched/state"
)

// ErrForbidden marks a request its caller may not make (HTTP 403).
var ErrForbidden = fault.ErrForbidden

// Who may call which route is decided by sched/httpapi, from its route
// table's rules (httpapi.Rule: anyone, a node's credential, admins).
// What depends on the data is decided here, each rule once:
//
//	a job's owner or an admin    kills, holds, releases, signals it,
//	                             attaches to it, reaches its services
//	                             (mayControl)
//	a token's owner or an admin  lists and revokes it (tokens.go)
//
// A caller without an identity came over a listener that does not
// authenticate (the unix socket's root, schedd --insecure-tcp) and is
// trusted.

// caller returns the request's identity, if any.
func caller(ctx context.Context) (auth.Identity, bool) { return auth.FromContext(ctx) }

// What a job's owner may do: the end of mayControl's refusal.
const (
	doControl = "control only your own jobs"
	doAttach  = "attach only to your own jobs"
	doReach   = "reach only your own jobs' services"
)

// mayControl says whether the caller may act on j (kill, hold, release,
// signal, attach, reach its services; doing says which, for the
// refusal): its owner or an admin may. The one place this is decided.
func mayControl(ctx context.Context, j *state.Job, doing string) error {
	id, ok := caller(ctx)
	if !ok || id.Admin || id.UID == j.UID {
		return nil
	}
	return fmt.Errorf("%w: job %d belongs to %s; you (%s) may %s", ErrForbidden, j.ID, j.User, id.User, doing)
}
