// Package web is schedd's web page (schedd --web-addr): the queue, the
// nodes, the reservations on a timeline, the partitions, the fair-share
// tree and one job's detail,
// refreshed live without reloading; and, for a user who logged in, a
// form to submit a job file, kill, hold and release buttons on their own
// jobs, and a terminal on an interactive job's main1.
//
// The page is one HTML file, a stylesheet, a script and the vendored
// xterm.js (static/vendor, refreshed by contrib/dev/update-xterm),
// embedded in the binary: no build step, no external assets. Its script
// reads JSON from the same listener's /v1 endpoints and waits for
// changes with blocking queries: GET /v1/jobs?index=N&wait=D returns
// when the state index passes N (the X-Troupe-Index header), and the
// page then re-reads the rest.
//
// Who is calling (session.go): nobody, until they log in with one of
// their bearer tokens (badmin token create). Anonymous callers get the
// read-only API (sched's ReadOnlyHandler: GET only, other users' jobs
// redacted). A session's requests go to the same /v1 API the CLI uses,
// as the token's owner, so the server's own authorization decides what
// they may do; the listener passes on only the page's endpoints
// (apiRoutes). Writes need the session's CSRF token in a header.
//
// It must not import sched or sched/state: it reaches the controller
// through the interface it declares (schedd imports it, not the other
// way).
package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/connlimit"
	"github.com/troupe-hpc/troupe/sched/httpapi"
)

//go:embed static
var static embed.FS

// files are the page's assets by URL path.
var files = map[string]struct{ name, typ string }{
	"/":                         {"static/index.html", "text/html; charset=utf-8"},
	"/app.js":                   {"static/app.js", "text/javascript; charset=utf-8"},
	"/terminal.js":              {"static/terminal.js", "text/javascript; charset=utf-8"},
	"/style.css":                {"static/style.css", "text/css; charset=utf-8"},
	"/vendor/xterm.js":          {"static/vendor/xterm.js", "text/javascript; charset=utf-8"},
	"/vendor/xterm.css":         {"static/vendor/xterm.css", "text/css; charset=utf-8"},
	"/vendor/addon-fit.js":      {"static/vendor/addon-fit.js", "text/javascript; charset=utf-8"},
	"/vendor/LICENSE.xterm":     {"static/vendor/LICENSE.xterm", "text/plain; charset=utf-8"},
	"/vendor/LICENSE.addon-fit": {"static/vendor/LICENSE.addon-fit", "text/plain; charset=utf-8"},
}

// Backend is what the page needs of schedd (sched.Server).
type Backend interface {
	// ReadOnlyHandler is the API for anonymous callers: GET only,
	// others' jobs redacted.
	ReadOnlyHandler() http.Handler
	// Handler is the full /v1 API; requests carry the caller's
	// auth.Identity in their context.
	Handler() http.Handler
	// Identify maps a bearer token to its owner (sched.Server.Identify).
	Identify(secret string) (auth.Identity, error)
	// Attach connects the caller in ctx to a job's terminal, as battach
	// (sched.Server.Attach).
	Attach(ctx context.Context, job uint64, host string) (net.Conn, error)
}

// page is the listener's handler.
type page struct {
	b        Backend
	ro, full http.Handler
	api      *http.ServeMux // the /v1 endpoints a session reaches
	sessions *sessions
	out      Output
	now      func() time.Time
}

// apiRoutes are the /v1 endpoints a logged-in page may call; anything
// else (tokens, nodes' endpoints, snapshots, reconfig) is not served
// here, whoever asks.
var apiRoutes = []string{
	"GET /v1/jobs", "GET /v1/jobs/{id}", "GET /v1/nodes", "GET /v1/partitions", "GET /v1/fairshare", "GET /v1/reservations",
	"POST /v1/jobs", "POST /v1/jobs/{id}/kill", "POST /v1/jobs/{id}/hold", "POST /v1/jobs/{id}/release",
}

// Handler serves the page at / and the API at /v1/: anonymous requests
// reach b's read-only API (anything but GET and HEAD is refused), a
// session's reach apiRoutes of b's full API as the session's user.
// POST /login, /logout and /submit, GET /session, the terminal's
// WebSocket (GET /v1/jobs/{id}/terminal) and a job's output as bpeek -f
// shows it (GET /v1/jobs/{id}/output, with out) are the page's own.
func Handler(b Backend, out Output) http.Handler {
	p := &page{b: b, ro: b.ReadOnlyHandler(), full: b.Handler(), api: http.NewServeMux(), sessions: newSessions(), out: out, now: time.Now}
	for _, r := range apiRoutes {
		p.api.Handle(r, p.full)
	}
	return p
}

func (p *page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Scripts and data from this origin only; no framing. Styles may
	// also be inline: xterm.js's renderer writes its own <style>
	// elements (the page's script writes text with textContent only).
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	if !read && !sameOrigin(r) {
		httpError(w, http.StatusForbidden, fmt.Errorf("%s %s: the request comes from another site (Origin %s)", r.Method, r.URL.Path, r.Header.Get("Origin")))
		return
	}
	s, id := p.sessions.get(w, r, p.b, p.now())
	switch path := r.URL.Path; {
	case path == "/login" && r.Method == http.MethodPost:
		p.login(w, r)
	case path == "/logout" && r.Method == http.MethodPost:
		p.logout(w, r, s)
	case path == "/session" && read:
		p.session(w, s, id)
	case path == "/submit" && r.Method == http.MethodPost:
		if p.write(w, r, s) {
			p.submit(w, r, id)
		}
	case strings.HasPrefix(path, "/v1/") && strings.HasSuffix(path, "/terminal"):
		p.terminal(w, r, s, id)
	case strings.HasPrefix(path, "/v1/") && strings.HasSuffix(path, "/output"):
		p.output(w, r, s, id)
	case strings.HasPrefix(path, "/v1/"):
		h.Set("Cache-Control", "no-store")
		if s == nil {
			p.ro.ServeHTTP(w, r)
			return
		}
		if _, pattern := p.api.Handler(r); pattern == "" {
			httpError(w, http.StatusNotFound, fmt.Errorf("%s %s: not served on the web listener", r.Method, path))
			return
		}
		if !read && !p.write(w, r, s) {
			return
		}
		p.api.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), id)))
	case !read:
		h.Set("Allow", "GET, HEAD")
		httpError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: the page's files are read-only (GET only)", r.Method, path))
	default:
		serveFile(w, r)
	}
}

func serveFile(w http.ResponseWriter, r *http.Request) {
	f, ok := files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(static, f.name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", f.typ)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// Serve serves h on addr until ctx ends: over TLS when certFile and
// keyFile are given, plain HTTP otherwise. It fails only when addr
// cannot be listened on; later errors go to warn. guard, when set,
// counts the listener's connections with the API's (connlimit.Guard).
func Serve(ctx context.Context, addr, certFile, keyFile string, h http.Handler, guard *connlimit.Guard, warn func(msg string, args ...any)) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--web-addr: %w", err)
	}
	// Requests' contexts end with ctx: open terminals close with it
	// (Shutdown leaves hijacked connections alone).
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	if guard != nil {
		// The page's visitors are users: their connections count
		// against schedd's open files like the API's (httpapi.ConnGuard).
		ln = guard.Listen(ln)
		srv.Handler, srv.ConnState, srv.ConnContext = httpapi.ConnGuard(guard, h), guard.ConnState, guard.ConnContext
	}
	go func() {
		var err error
		if certFile != "" {
			err = srv.ServeTLS(ln, certFile, keyFile)
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			warn("web server", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close() // pages still waiting on blocking queries, open terminals
		}
	}()
	return ln.Addr(), nil
}
