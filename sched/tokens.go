package sched

import (
	"context"
	"fmt"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/sched/fault"
	"github.com/troupe-hpc/troupe/sched/state"
)

// ErrUnauthenticated marks a request whose bearer token is missing,
// unknown or revoked (HTTP 401).
var ErrUnauthenticated = fault.ErrUnauthenticated

// Identify maps a bearer secret to the identity TCPHandler gives its
// bearer: a user token's owner (admin if issued so), the join token, or
// a node credential. An unknown or revoked secret is ErrUnauthenticated.
// The web page (sched/web) asks it on every request of a session.
func (s *access) Identify(secret string) (auth.Identity, error) { return s.identify(secret) }

// identify maps a bearer secret to an identity.
func (s *access) identify(secret string) (auth.Identity, error) {
	if s.cfg.JoinToken != "" && auth.Equal(secret, s.cfg.JoinToken) {
		return auth.Identity{UID: -1, GID: -1, User: "join-token", Join: true}, nil
	}
	t := s.st.Snapshot().TokenByHash(auth.Hash(secret))
	if t == nil {
		return auth.Identity{}, fmt.Errorf("%w: the bearer token is unknown or revoked", ErrUnauthenticated)
	}
	if t.Node != "" {
		return auth.Identity{UID: -1, GID: -1, User: "node/" + t.Node, Node: t.Node, TokenID: t.ID}, nil
	}
	return auth.Identity{UID: t.UID, GID: t.GID, User: t.User, Admin: t.Admin, TokenID: t.ID}, nil
}

// CreateToken issues a user token. An admin (or a trusted listener) may
// name any user and make admin tokens; anyone else gets a token for
// themselves only.
func (s *access) CreateToken(ctx context.Context, req api.TokenCreate) (api.TokenCreated, error) {
	id, ok := caller(ctx)
	if ok && (id.Node != "" || id.Join) {
		return api.TokenCreated{}, fmt.Errorf("%w: node credentials cannot issue tokens", ErrForbidden)
	}
	admin := !ok || id.Admin
	var owner auth.Identity
	switch {
	case req.User == "" && !ok:
		return api.TokenCreated{}, fmt.Errorf("%w: name the token's user (--user)", ErrInvalid)
	case req.User == "" || (ok && req.User == id.User):
		owner = id
		owner.Admin = false
	case !admin:
		return api.TokenCreated{}, fmt.Errorf("%w: only administrators issue tokens for other users; you are %s", ErrForbidden, id.User)
	default:
		o, err := auth.LookupName(req.User, -1)
		if err != nil {
			return api.TokenCreated{}, fmt.Errorf("%w: user %q: %v", ErrInvalid, req.User, err)
		}
		owner = o
	}
	if req.Admin && !admin {
		return api.TokenCreated{}, fmt.Errorf("%w: only administrators issue admin tokens", ErrForbidden)
	}
	secret := auth.NewSecret()
	t := api.Token{ID: auth.NewID(), Hash: auth.Hash(secret), UID: owner.UID, GID: owner.GID, User: owner.User,
		Admin: req.Admin, Created: s.cfg.Clock().UTC()}
	if _, err := s.apply(ctx, state.Command{Act: state.PutToken{Token: tokenRow(&t)}}); err != nil {
		return api.TokenCreated{}, err
	}
	t.Hash = ""
	return api.TokenCreated{Token: t, Secret: secret}, nil
}

// nodeCredential issues (or replaces) node's credential.
func (s *access) nodeCredential(ctx context.Context, node string) (string, error) {
	secret := auth.NewSecret()
	t := api.Token{ID: "node-" + node, Hash: auth.Hash(secret), UID: -1, GID: -1, User: "node/" + node, Node: node, Created: s.cfg.Clock().UTC()}
	if _, err := s.apply(ctx, state.Command{Act: state.PutToken{Token: tokenRow(&t)}}); err != nil {
		return "", err
	}
	return secret, nil
}

// Tokens lists the tokens the caller may see: all for admins, else
// their own.
func (s *access) Tokens(ctx context.Context) api.TokenList {
	id, ok := caller(ctx)
	out := api.TokenList{Tokens: []api.Token{}}
	for _, t := range s.st.Snapshot().Tokens() {
		if ok && !id.Admin && (t.Node != "" || t.UID != id.UID) {
			continue
		}
		c := *tokenView(t)
		c.Hash = ""
		out.Tokens = append(out.Tokens, c)
	}
	return out
}

// RevokeToken deletes a token: its owner or an admin may.
func (s *access) RevokeToken(ctx context.Context, tid string) error {
	t := s.st.Snapshot().Token(tid)
	if t == nil {
		return fmt.Errorf("token %q: %w", tid, state.ErrNotFound)
	}
	if id, ok := caller(ctx); ok && !id.Admin && (t.Node != "" || t.UID != id.UID || id.Node != "" || id.Join) {
		return fmt.Errorf("%w: token %s belongs to %s", ErrForbidden, tid, t.User)
	}
	_, err := s.apply(ctx, state.Command{Act: state.Revoke{ID: tid}})
	return err
}
