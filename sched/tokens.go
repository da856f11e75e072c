package sched

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/sched/state"
)

// ErrUnauthenticated marks a request whose bearer token is missing,
// unknown or revoked (HTTP 401).
var ErrUnauthenticated = errors.New("unauthenticated")

// TCPHandler is the API for a TCP listener: every request must carry a
// bearer token (Authorization: Bearer …), which becomes the caller's
// identity under the same rules as the unix socket's peer credentials:
//
//   - a user token (badmin token create) is its owner, admin if issued so;
//   - the cluster's join token may only POST /v1/nodes/register, which
//     answers the node's own credential;
//   - a node credential acts only for its node (/v1/nodes/NAME/…).
//
// An unknown or revoked token is refused with 401. trustAnonymous (the
// dev-only schedd --insecure-tcp) lets requests without a token through
// as trusted, as the unix socket's root would be.
func (s *Server) TCPHandler(trustAnonymous bool) http.Handler {
	h := s.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.redirectToLeader(w, r) {
			return
		}
		secret := auth.Bearer(r)
		if secret == "" {
			if trustAnonymous {
				h.ServeHTTP(w, r)
				return
			}
			writeErr(w, fmt.Errorf("%w: schedd over TCP needs a bearer token: set TROUPE_TOKEN or write one to ~/.troupe/token (badmin token create issues them)", ErrUnauthenticated))
			return
		}
		id, err := s.identify(secret)
		if err != nil {
			writeErr(w, err)
			return
		}
		switch {
		case id.Join && !(r.Method == http.MethodPost && r.URL.Path == "/v1/nodes/register"):
			writeErr(w, fmt.Errorf("%w: the join token only registers nodes (POST /v1/nodes/register)", ErrForbidden))
			return
		case id.Node != "" && r.URL.Path != "/v1/nodes/register" && !strings.HasPrefix(r.URL.Path, "/v1/nodes/"+id.Node+"/"):
			writeErr(w, fmt.Errorf("%w: the credential of node %s acts only for that node, not at %s", ErrForbidden, id.Node, r.URL.Path))
			return
		}
		h.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), id)))
	})
}

// identify maps a bearer secret to an identity.
func (s *Server) identify(secret string) (auth.Identity, error) {
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
func (s *Server) CreateToken(ctx context.Context, req api.TokenCreate) (api.TokenCreated, error) {
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
	if _, err := s.apply(ctx, state.Command{Kind: state.CmdToken, Token: &t}); err != nil {
		return api.TokenCreated{}, err
	}
	t.Hash = ""
	return api.TokenCreated{Token: t, Secret: secret}, nil
}

// nodeCredential issues (or replaces) node's credential.
func (s *Server) nodeCredential(ctx context.Context, node string) (string, error) {
	secret := auth.NewSecret()
	t := api.Token{ID: "node-" + node, Hash: auth.Hash(secret), UID: -1, GID: -1, User: "node/" + node, Node: node, Created: s.cfg.Clock().UTC()}
	if _, err := s.apply(ctx, state.Command{Kind: state.CmdToken, Token: &t}); err != nil {
		return "", err
	}
	return secret, nil
}

// Tokens lists the tokens the caller may see: all for admins, else
// their own.
func (s *Server) Tokens(ctx context.Context) api.TokenList {
	id, ok := caller(ctx)
	out := api.TokenList{Tokens: []api.Token{}}
	for _, t := range s.st.Snapshot().Tokens() {
		if ok && !id.Admin && (t.Node != "" || t.UID != id.UID) {
			continue
		}
		c := *t
		c.Hash = ""
		out.Tokens = append(out.Tokens, c)
	}
	return out
}

// RevokeToken deletes a token: its owner or an admin may.
func (s *Server) RevokeToken(ctx context.Context, tid string) error {
	t := s.st.Snapshot().Token(tid)
	if t == nil {
		return fmt.Errorf("token %q: %w", tid, state.ErrNotFound)
	}
	if id, ok := caller(ctx); ok && !id.Admin && (t.Node != "" || t.UID != id.UID || id.Node != "" || id.Join) {
		return fmt.Errorf("%w: token %s belongs to %s", ErrForbidden, tid, t.User)
	}
	_, err := s.apply(ctx, state.Command{Kind: state.CmdRevoke, Revoke: tid})
	return err
}

func (s *Server) handleTokenCreate(w http.ResponseWriter, r *http.Request) {
	var req api.TokenCreate
	if !decode(w, r, &req) {
		return
	}
	res, err := s.CreateToken(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, 0, res)
}

func (s *Server) handleTokens(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, 0, s.Tokens(r.Context()))
}

func (s *Server) handleTokenRevoke(w http.ResponseWriter, r *http.Request) {
	if err := s.RevokeToken(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, struct{}{})
}

// nodeOnly wraps a /v1/nodes/{name}/… handler: admins, trusted
// listeners and the node's own credential reach it.
func nodeOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id, ok := caller(r.Context()); ok && !id.Admin && id.Node != r.PathValue("name") {
			who := id.User
			if id.Node == "" {
				who = fmt.Sprintf("%s (uid %d)", id.User, id.UID)
			}
			writeErr(w, fmt.Errorf("%w: %s %s is for node %s (or administrators); you are %s",
				ErrForbidden, r.Method, r.URL.Path, r.PathValue("name"), who))
			return
		}
		h(w, r)
	}
}
