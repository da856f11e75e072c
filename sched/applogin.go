package sched

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// A browser cannot send a bearer token, so it logs in to one app with a
// ticket: the job's owner asks for one (POST
// /v1/jobs/{id}/apps/{service}/login, on their own credential), opens
// the URL it comes in (?troupe-login=TICKET) once within appTicketTTL,
// and gets a cookie that opens that job's service, and nothing else,
// while that run of the job lasts (at most appSessionTTL). Both are
// leader-local, kept as hashes.
const (
	AppLoginParam = "troupe-login" // the ticket's query parameter
	AppCookie     = "troupe-app"   // the session cookie, scoped to /apps/JOB/SERVICE/
	appTicketTTL  = 2 * time.Minute
	appSessionTTL = 24 * time.Hour
)

// appGrant is what a ticket or a session opens: one service of one run
// of a job, for its owner.
type appGrant struct {
	who     auth.Identity
	job     uint64
	run     int
	service string
	expires time.Time
}

// appLogins holds the tickets and sessions, by the hash of their secret.
type appLogins struct {
	mu       sync.Mutex
	tickets  map[string]appGrant
	sessions map[string]appGrant
}

// add stores g under secret's hash in m (made on first use), dropping
// what has expired.
func (l *appLogins) add(m *map[string]appGrant, secret string, g appGrant, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if *m == nil {
		*m = map[string]appGrant{}
	}
	for k, v := range *m {
		if now.After(v.expires) {
			delete(*m, k)
		}
	}
	(*m)[auth.Hash(secret)] = g
}

// take returns the ticket secret names and removes it: a ticket opens
// one session.
func (l *appLogins) take(secret string, now time.Time) (appGrant, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := auth.Hash(secret)
	g, ok := l.tickets[h]
	delete(l.tickets, h)
	return g, ok && !now.After(g.expires)
}

// session returns the session secret names.
func (l *appLogins) session(secret string, now time.Time) (appGrant, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.sessions[auth.Hash(secret)]
	return g, ok && !now.After(g.expires)
}

// opens says whether g is for service of j's current run.
func (g appGrant) opens(j *api.Job, service string) bool {
	return g.job == j.ID && g.run == j.Requeues && g.service == service && g.who.UID == j.UID
}

// handleAppLogin serves POST /v1/jobs/{id}/apps/{service}/login: a
// ticket for the job's owner's browser (api.AppLogin). Only the owner
// gets one, not an administrator: the app's pages share schedd's origin
// and could use whatever that browser holds for other apps.
func (s *Server) handleAppLogin(w http.ResponseWriter, r *http.Request) {
	id, ok := jobID(w, r)
	if !ok {
		return
	}
	if !s.IsLeader() {
		writeErr(w, fmt.Errorf("%w: apps are served by the leader (%s)", raftlog.ErrNotLeader, s.leaderAPI()))
		return
	}
	j := s.st.Snapshot().Job(id)
	if j == nil {
		writeErr(w, fmt.Errorf("job %d: %w", id, state.ErrNotFound))
		return
	}
	who, known := caller(r.Context())
	switch {
	case !known: // a trusted listener: the login is the owner's
		who = auth.Identity{UID: j.UID, GID: j.GID, User: j.User}
	case who.UID != j.UID || who.Node != "" || who.Join:
		writeErr(w, fmt.Errorf("%w: job %d belongs to %s; only its owner gets a browser login to its services (you are %s)", ErrForbidden, j.ID, j.User, who.User))
		return
	}
	name := r.PathValue("service")
	if j.Spec.Service(name) == nil {
		writeErr(w, fmt.Errorf("job %d declares no service %q (%s): %w", id, name, serviceNames(j), state.ErrNotFound))
		return
	}
	if _, err := appNode(j); err != nil {
		writeErr(w, err)
		return
	}
	now := s.cfg.Clock()
	ticket := auth.NewSecret()
	s.appLogins.add(&s.appLogins.tickets, ticket, appGrant{who: who, job: id, run: j.Requeues, service: name, expires: now.Add(appTicketTTL)}, now)
	path := appPrefix(id, name) + "/?" + AppLoginParam + "=" + url.QueryEscape(ticket)
	res := api.AppLogin{Path: path, Expires: now.Add(appTicketTTL).UTC()}
	if base := s.cfg.APIAddr; strings.HasPrefix(base, "http://") || strings.HasPrefix(base, "https://") {
		res.URL = strings.TrimRight(base, "/") + path
	}
	s.log.Info("app login ticket issued", "job", id, "service", name, "user", who.User)
	writeJSON(w, http.StatusOK, 0, res)
}

// appPrefix is the path of job's service, without the final slash.
func appPrefix(job uint64, service string) string {
	return fmt.Sprintf("%s%d/%s", AppsPrefix, job, service)
}

// redeemAppLogin turns the ticket of the request's ?troupe-login= into
// a session cookie for the service, and sends the browser on to the
// same URL without the ticket.
func (s *Server) redeemAppLogin(w http.ResponseWriter, r *http.Request, j *api.Job, service, ticket string) {
	now := s.cfg.Clock()
	g, ok := s.appLogins.take(ticket, now)
	if !ok || !g.opens(j, service) {
		writeErr(w, fmt.Errorf("%w: the login link is unknown, used or expired (links work once, for %s); ask for a new one with bjob --login %s %d", ErrUnauthenticated, appTicketTTL, service, j.ID))
		return
	}
	secret := auth.NewSecret()
	g.expires = now.Add(appSessionTTL)
	s.appLogins.add(&s.appLogins.sessions, secret, g, now)
	prefix := appPrefix(j.ID, service)
	http.SetCookie(w, &http.Cookie{Name: AppCookie, Value: secret, Path: prefix + "/",
		MaxAge: int(appSessionTTL / time.Second), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	q := r.URL.Query()
	q.Del(AppLoginParam)
	to := r.URL.EscapedPath()
	if len(q) > 0 {
		to += "?" + q.Encode()
	}
	s.log.Info("app login", "job", j.ID, "service", service, "user", g.who.User)
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// appCaller is the caller of an /apps request: its listener's identity,
// or, for Anonymous (a browser over TCP, without a token), the owner
// its session cookie for this service of j's run names.
func (s *Server) appCaller(r *http.Request, j *api.Job, service string) (context.Context, error) {
	ctx := r.Context()
	if id, ok := caller(ctx); !ok || id != Anonymous {
		return ctx, nil
	}
	if c, err := r.Cookie(AppCookie); err == nil {
		if g, ok := s.appLogins.session(c.Value, s.cfg.Clock()); ok && g.opens(j, service) {
			return auth.WithIdentity(ctx, g.who), nil
		}
	}
	return nil, fmt.Errorf("%w: no bearer token and no login to job %d's service %s in this browser; bjob --login %s %d prints a login link", ErrUnauthenticated, j.ID, service, service, j.ID)
}

// dropCookie removes cookie name from a Cookie header's value, keeping
// the others byte for byte.
func dropCookie(header, name string) string {
	var keep []string
	for _, part := range strings.Split(header, ";") {
		n, _, _ := strings.Cut(strings.TrimSpace(part), "=")
		if n != name {
			keep = append(keep, strings.TrimSpace(part))
		}
	}
	return strings.Join(keep, "; ")
}
