// Package web is schedd's read-only web page (schedd --web-addr): the
// queue, the nodes, the partitions, the fair-share tree and one job's
// detail, refreshed live without reloading.
//
// The page is one HTML file, a stylesheet and a script, embedded in the
// binary: no build step, no external assets. Its script reads JSON from
// the same listener's /v1 GET endpoints (sched's ReadOnlyHandler) and
// waits for changes with blocking queries: GET /v1/jobs?index=N&wait=D
// returns when the state index passes N (the X-Troupe-Index header), and
// the page then re-reads the rest.
//
// The listener is unauthenticated, so everything on it only reads: any
// method but GET and HEAD is refused, and the API behind it answers as
// an anonymous caller, who sees other users' jobs redacted.
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
)

//go:embed static
var static embed.FS

// files are the page's assets by URL path.
var files = map[string]struct{ name, typ string }{
	"/":          {"static/index.html", "text/html; charset=utf-8"},
	"/app.js":    {"static/app.js", "text/javascript; charset=utf-8"},
	"/style.css": {"static/style.css", "text/css; charset=utf-8"},
}

// Handler serves the page at / and hands /v1/ to api, which must only
// read (sched.Server.ReadOnlyHandler). Requests other than GET and HEAD
// are refused whatever their path.
func Handler(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, r.Method+" "+r.URL.Path+": this listener is read-only (GET only)", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		// Scripts, styles and data from this origin only; no framing.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			h.Set("Cache-Control", "no-store")
			api.ServeHTTP(w, r)
			return
		}
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
		h.Set("Content-Type", f.typ)
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	})
}

// Serve serves h on addr (plain HTTP) until ctx ends. It fails only when
// addr cannot be listened on; later errors go to warn.
func Serve(ctx context.Context, addr string, h http.Handler, warn func(msg string, args ...any)) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--web-addr: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			warn("web server", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close() // pages still waiting on blocking queries
		}
	}()
	return ln.Addr(), nil
}
