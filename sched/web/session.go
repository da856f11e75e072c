package web

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
)

// Logging in. The user pastes one of their bearer tokens (badmin token
// create, over the unix socket where the kernel vouches for them) into
// the page once; POST /login checks it (Backend.Identify) and answers a
// session cookie:
//
//	troupe_session=<random>; Path=/; HttpOnly; SameSite=Strict
//	__Host-troupe_session=<random>; Path=/; Secure; HttpOnly; SameSite=Strict
//
// the second when the page is served over TLS: a __Host- cookie is one
// the browser keeps for this host name alone, from a secure page, so no
// other host (a sibling name under the same domain) can set or
// overwrite it with a Domain attribute; the page reads only that name
// then. Over plain HTTP (the page on 127.0.0.1, or through a tunnel to
// it) not every browser keeps a Secure cookie, and there the prefix
// would add nothing: a page on any port of the same host may set a
// cookie of that name (Chromium counts loopback pages as secure). Each
// cookie is host-only (no Domain attribute), so it never
// reaches another host name, such as an app's under bapp
// (RANDOM.localhost). The token stays in schedd's
// memory with the session, never in the browser again: every request of
// the session presents it to Identify anew, so revoking the token (badmin
// token revoke) ends the session at once. A session lasts SessionTTL,
// or until POST /logout; a restart of schedd ends them all.
//
// Writes (POST) need the session's CSRF token, which GET /session
// answers to the page's own script, in the CSRFHeader header; and any
// request that is not a GET must come from the page's own origin (the
// Origin header, which browsers send, names this host). With the cookie
// SameSite=Strict, another site's page can neither send the session nor
// read the CSRF token.

// CookieName is the session cookie over plain HTTP, SecureCookieName
// over TLS.
const (
	CookieName       = "troupe_session"
	SecureCookieName = "__Host-" + CookieName
)

// cookieName is the session cookie's name for r.
func cookieName(r *http.Request) string {
	if r.TLS != nil {
		return SecureCookieName
	}
	return CookieName
}

// CSRFHeader carries a session's CSRF token on its writes.
const CSRFHeader = "X-Troupe-CSRF"

// SessionTTL is how long a session lasts after logging in.
var SessionTTL = 12 * time.Hour

// maxSessions bounds the sessions held; the oldest go first.
const maxSessions = 10000

type session struct {
	key     string // auth.Hash of the cookie's value
	secret  string // the bearer token it logged in with
	csrf    string
	expires time.Time
}

type sessions struct {
	mu sync.Mutex
	m  map[string]*session // by key
}

func newSessions() *sessions { return &sessions{m: map[string]*session{}} }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// add starts a session for secret and returns its cookie value.
func (ss *sessions) add(secret string, now time.Time) (string, *session) {
	value := randomHex(32)
	s := &session{key: auth.Hash(value), secret: secret, csrf: randomHex(32), expires: now.Add(SessionTTL)}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for k, o := range ss.m {
		if !now.Before(o.expires) {
			delete(ss.m, k)
		}
	}
	for len(ss.m) >= maxSessions {
		var oldest *session
		for _, o := range ss.m {
			if oldest == nil || o.expires.Before(oldest.expires) {
				oldest = o
			}
		}
		delete(ss.m, oldest.key)
	}
	ss.m[s.key] = s
	return value, s
}

func (ss *sessions) drop(s *session) {
	ss.mu.Lock()
	delete(ss.m, s.key)
	ss.mu.Unlock()
}

// get returns the request's session and who it is, or nil: no cookie,
// or one that is unknown, expired, or whose token was revoked (then the
// cookie is cleared and the request goes on as anonymous).
func (ss *sessions) get(w http.ResponseWriter, r *http.Request, b Backend, now time.Time) (*session, auth.Identity) {
	c, err := r.Cookie(cookieName(r))
	if err != nil || c.Value == "" {
		return nil, auth.Identity{}
	}
	ss.mu.Lock()
	s := ss.m[auth.Hash(c.Value)]
	ss.mu.Unlock()
	if s != nil && now.Before(s.expires) {
		if id, err := b.Identify(s.secret); err == nil && userIdentity(id) == nil {
			return s, id
		}
	}
	if s != nil {
		ss.drop(s)
	}
	clearCookie(w, r)
	return nil, auth.Identity{}
}

// userIdentity refuses what may not log in: the join token and node
// credentials act for nodes, not people.
func userIdentity(id auth.Identity) error {
	if id.Join || id.Node != "" {
		return errors.New("the join token and node credentials cannot log in; use a user's token (badmin token create)")
	}
	return nil
}

func setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: cookieName(r), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

func clearCookie(w http.ResponseWriter, r *http.Request) { setCookie(w, r, "", -1) }

// sameOrigin says whether r, a write, comes from this page: browsers send
// Origin with every POST and WebSocket handshake, and it must name the
// host the request was sent to. A request without one did not come from
// a browser's page (curl, tests); it still needs the session's cookie
// and CSRF token.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// write checks that r may change something in session s: there is one,
// and r carries its CSRF token.
func (p *page) write(w http.ResponseWriter, r *http.Request, s *session) bool {
	if s == nil {
		httpError(w, http.StatusUnauthorized, fmt.Errorf("%s %s: log in first (the page's Log in button, with a token from badmin token create)", r.Method, r.URL.Path))
		return false
	}
	if got := r.Header.Get(CSRFHeader); got == "" || !auth.Equal(got, s.csrf) {
		httpError(w, http.StatusForbidden, fmt.Errorf("%s %s: missing or wrong %s header (the page sends its session's)", r.Method, r.URL.Path, CSRFHeader))
		return false
	}
	return true
}

// Session is what GET /session and POST /login answer.
type Session struct {
	User  string `json:"user"` // "" not logged in
	UID   int    `json:"uid"`
	Admin bool   `json:"admin,omitempty"`
	CSRF  string `json:"csrf,omitempty"`
}

// Login is POST /login's body.
type Login struct {
	Token string `json:"token"`
}

func (p *page) login(w http.ResponseWriter, r *http.Request) {
	// JSON only: a form on another site cannot send it without asking
	// (CORS preflight), and this listener allows no other origin.
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		httpError(w, http.StatusUnsupportedMediaType, errors.New(`POST /login: send {"token": "trp_…"} as application/json`))
		return
	}
	var in Login
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		httpError(w, http.StatusBadRequest, fmt.Errorf("POST /login: request body: %v", err))
		return
	}
	secret := strings.TrimSpace(in.Token)
	if secret == "" {
		httpError(w, http.StatusBadRequest, errors.New("POST /login: token is empty; paste one from badmin token create"))
		return
	}
	id, err := p.b.Identify(secret)
	if err != nil {
		httpError(w, http.StatusUnauthorized, fmt.Errorf("log in: %v", err))
		return
	}
	if err := userIdentity(id); err != nil {
		httpError(w, http.StatusForbidden, fmt.Errorf("log in: %v", err))
		return
	}
	value, s := p.sessions.add(secret, p.now())
	setCookie(w, r, value, 0)
	writeJSON(w, http.StatusOK, Session{User: id.User, UID: id.UID, Admin: id.Admin, CSRF: s.csrf})
}

func (p *page) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if s != nil {
		if !p.write(w, r, s) {
			return
		}
		p.sessions.drop(s)
	}
	clearCookie(w, r)
	writeJSON(w, http.StatusOK, Session{})
}

func (p *page) session(w http.ResponseWriter, s *session, id auth.Identity) {
	w.Header().Set("Cache-Control", "no-store")
	if s == nil {
		writeJSON(w, http.StatusOK, Session{UID: -1})
		return
	}
	writeJSON(w, http.StatusOK, Session{User: id.User, UID: id.UID, Admin: id.Admin, CSRF: s.csrf})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// httpError answers err as the API does: {"error": "…"}.
func httpError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, api.Error{Error: err.Error()})
}
