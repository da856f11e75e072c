// Package auth says who is calling schedd. On the unix socket the kernel
// tells: ConnContext reads the peer's credentials (SO_PEERCRED) when the
// connection is accepted and every request on it carries them. Handlers
// ask FromContext; a request with no identity came over a listener that
// does not authenticate (plain TCP, tests), which schedd treats as the
// trusted network schedd(8) describes for --insecure-tcp.
//
// It imports no troupe package.
package auth

import (
	"context"
	"net"
	"os/user"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Identity is an authenticated caller.
type Identity struct {
	UID, GID int
	User     string // login name, or the uid in decimal when it has none
	Admin    bool   // root, or a member of the admin group
	PID      int    // the peer's pid at connect time (unix socket), 0 otherwise
	// Node is set for a node credential: it acts for that node only.
	Node string
	// Join marks the bearer of the cluster's join token: it may only
	// register a node.
	Join bool
	// TokenID is the bearer token the caller presented ("" on the socket).
	TokenID string
}

type ctxKey struct{}

// WithIdentity returns ctx carrying id (ConnContext does this; tests may).
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the caller's identity, if the listener gave one.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(ctxKey{}).(Identity)
	return id, ok
}

// PeerCreds makes an http.Server ConnContext that reads SO_PEERCRED from
// unix-socket connections; adminGID >= 0 names the group whose members
// are admins besides root (-1: root only). Connections that are not unix
// sockets pass through unchanged.
func PeerCreds(adminGID int) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		// A listener may wrap its connections (connlimit counts them).
		for {
			u, ok := c.(interface{ NetConn() net.Conn })
			if !ok {
				break
			}
			c = u.NetConn()
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			return ctx
		}
		raw, err := uc.SyscallConn()
		if err != nil {
			return WithIdentity(ctx, Identity{UID: -1, GID: -1, User: "unknown"})
		}
		var cred *unix.Ucred
		var cerr error
		if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil || cerr != nil {
			// Fail closed: an unknown peer is nobody, never root.
			return WithIdentity(ctx, Identity{UID: -1, GID: -1, User: "unknown"})
		}
		return WithIdentity(ctx, Lookup(int(cred.Uid), int(cred.Gid), int(cred.Pid), adminGID))
	}
}

// Lookup builds the identity of uid/gid: its login name and whether it
// is an admin (uid 0, or adminGID among its groups).
func Lookup(uid, gid, pid, adminGID int) Identity {
	id := Identity{UID: uid, GID: gid, PID: pid, User: strconv.Itoa(uid), Admin: uid == 0}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err == nil {
		id.User = u.Username
	}
	if !id.Admin && adminGID >= 0 {
		if gid == adminGID {
			id.Admin = true
		} else if err == nil {
			if gs, err := u.GroupIds(); err == nil {
				id.Admin = slices.Contains(gs, strconv.Itoa(adminGID))
			}
		}
	}
	return id
}

// LookupName builds the identity of the login name (or decimal uid) name.
func LookupName(name string, adminGID int) (Identity, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.Atoi(name); nerr == nil {
			u, err = user.LookupId(name)
		}
		if err != nil {
			return Identity{}, err
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return Lookup(uid, gid, 0, adminGID), nil
}

// GroupID resolves a group name (or number) to its gid.
func GroupID(name string) (int, error) {
	if n, err := strconv.Atoi(name); err == nil {
		return n, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return -1, err
	}
	return strconv.Atoi(g.Gid)
}
