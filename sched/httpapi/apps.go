package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/fault"
)

// app serves /apps/{id}/{service}/{rest...}: the caller, who must own
// the job (or be an admin; Controller.App decides), reaches the
// service's port in the job's running main1, with HTTP and WebSocket
// (Upgrade) alike. The app sees the path without /apps/ID/SERVICE
// (X-Forwarded-Prefix says it), unless the service keeps the prefix;
// never the caller's Authorization.
func (a *API) app(w http.ResponseWriter, r *http.Request) {
	ref, err := jobRef(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	id, err := a.c.JobRow(ref)
	if err != nil {
		writeErr(w, err)
		return
	}
	name := r.PathValue("service")
	svc, err := a.c.App(r.Context(), id, name, isUpgrade(r.Header))
	if err != nil {
		writeErr(w, err)
		return
	}
	if svc.Release != nil {
		defer svc.Release()
	}
	prefix := AppsPrefix + strconv.FormatUint(id, 10) + "/" + name
	if r.PathValue("rest") == "" && !strings.HasSuffix(r.URL.Path, "/") {
		// Relative links of the app's root page resolve under the prefix.
		to := prefix + "/"
		if r.URL.RawQuery != "" {
			to += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, to, http.StatusPermanentRedirect)
		return
	}
	rp := &httputil.ReverseProxy{
		Transport: svc.Transport,
		ErrorLog:  slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetXForwarded()
			u := pr.Out.URL
			u.Scheme, u.Host = "http", svc.Backend
			if !svc.KeepPrefix {
				u.Path = "/" + strings.TrimPrefix(strings.TrimPrefix(u.Path, prefix), "/")
				if u.RawPath != "" {
					u.RawPath = "/" + strings.TrimPrefix(strings.TrimPrefix(u.RawPath, prefix), "/")
				}
			}
			pr.Out.Host = pr.In.Host // the name the caller used
			pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
			pr.Out.Header.Del("Authorization") // the caller's token, never the job's
		},
		ModifyResponse: func(res *http.Response) error {
			// An app that redirects to "/x" means its own root.
			if loc := res.Header.Get("Location"); !svc.KeepPrefix && strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") {
				res.Header.Set("Location", prefix+loc)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return
			}
			var ae *AppError
			switch {
			case errors.As(err, &ae), errors.Is(err, fault.ErrEnded), errors.Is(err, fault.ErrConflict):
				writeJSON(w, http.StatusBadGateway, 0, api.Error{Error: fmt.Sprintf("job %d service %s: %v", id, name, err)})
			default:
				writeErr(w, fmt.Errorf("job %d service %s: %w", id, name, err))
			}
		},
	}
	rp.ServeHTTP(w, r)
}

// isUpgrade reports whether h asks to switch protocols (Connection:
// Upgrade with an Upgrade header, as a WebSocket does): such a request
// becomes a stream that stays open, where a plain one is a request and
// its answer.
func isUpgrade(h http.Header) bool {
	if h.Get("Upgrade") == "" {
		return false
	}
	for _, v := range h["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}
