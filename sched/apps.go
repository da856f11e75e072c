package sched

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// AppsPrefix is where schedd serves the jobs' services:
// /apps/JOB/SERVICE/… goes to the service's port in main1.
const AppsPrefix = "/apps/"

// appIdle is how long an idle connection to a service stays open for
// the next request (each costs the nodelet a round trip to open).
const appIdle = 30 * time.Second

// appProxy carries the /apps requests to the jobs' services. Its
// connections are streams the nodelet of main1 opens through the attach
// hub (attachHub), as for a terminal: the transport's "host" names the
// job, its run and the port, and its dialer asks the nodelet for them.
// Leader-local, as the hub.
type appProxy struct {
	once sync.Once
	tr   *http.Transport
}

// appHost is the name of a service's backend in the transport's URLs
// (its pool of idle connections is per name).
func appHost(job uint64, run, port int) string {
	return fmt.Sprintf("job%d-run%d-port%d.apps.troupe", job, run, port)
}

// parseAppHost reads appHost's name back from a dialed address.
func parseAppHost(addr string) (job uint64, run, port int, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, 0, 0, err
	}
	if _, err := fmt.Sscanf(host, "job%d-run%d-port%d.apps.troupe", &job, &run, &port); err != nil {
		return 0, 0, 0, fmt.Errorf("app address %q: %w", addr, err)
	}
	return job, run, port, nil
}

// transport returns the proxy's transport, made on first use.
func (s *Server) appTransport() *http.Transport {
	s.apps.once.Do(func() {
		s.apps.tr = &http.Transport{
			Proxy:               nil, // never the environment's HTTP proxy
			DialContext:         s.dialApp,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     appIdle,
			DisableCompression:  true, // the app's bytes as it sent them
		}
	})
	return s.apps.tr
}

// appError is why a nodelet did not connect a service (502).
type appError struct{ msg string }

func (e *appError) Error() string { return e.msg }

// dialApp opens a stream to a service's port: the nodelet of the job's
// main1 (of that run) is asked through its attach long-poll, connects
// its end, and says api.AppReady once it reached the port.
func (s *Server) dialApp(ctx context.Context, _, addr string) (net.Conn, error) {
	id, run, port, err := parseAppHost(addr)
	if err != nil {
		return nil, err
	}
	host := jobspec.RoleMain + "1"
	j := s.st.Snapshot().Job(id)
	if j == nil || j.Requeues != run {
		return nil, &appError{fmt.Sprintf("job %d (run %d) is gone", id, run)}
	}
	node, err := appNode(j)
	if err != nil {
		return nil, &appError{err.Error()}
	}
	req := api.AttachRequest{ID: auth.NewID(), JobID: id, Host: host, Run: run, Port: port}
	wait := s.attach.request(node, req)
	defer s.attach.forget(node, req.ID)
	timer := time.NewTimer(attachAnswer)
	defer timer.Stop()
	var nc net.Conn
	select {
	case nc = <-wait.conn:
	case <-timer.C:
		return nil, fmt.Errorf("%w: node %s did not connect job %d's port %d within %s", errUnavailable, node, id, port, attachAnswer)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	_ = nc.SetReadDeadline(time.Now().Add(attachAnswer))
	br := bufio.NewReader(nc)
	raw, err := br.ReadSlice('\n') // at most the buffer's 4 KiB
	line := string(raw)
	_ = nc.SetReadDeadline(time.Time{})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: node %s: job %d's port %d: %v", errUnavailable, node, id, port, err)
	}
	if line != api.AppReady {
		nc.Close()
		return nil, &appError{fmt.Sprintf("node %s: %s", node, strings.TrimPrefix(strings.TrimSpace(line), "error: "))}
	}
	return &bufferedConn{Conn: nc, r: br}, nil
}

// appNode is the node of j's main1 while it runs.
func appNode(j *state.Job) (string, error) {
	if j.State.Terminal() {
		return "", fmt.Errorf("%w: job %d has ended (%s); its services with it", state.ErrEnded, j.ID, j.State)
	}
	for _, c := range j.Containers {
		if c.Host == jobspec.RoleMain+"1" && c.State == api.ContainerRunning && c.Node != "" {
			return c.Node, nil
		}
	}
	return "", fmt.Errorf("%w: job %d is %s; its services open once main1 runs", state.ErrConflict, j.ID, j.State)
}

// handleApp serves /apps/{id}/{service}/{rest...}: the caller, who must
// own the job (or be an admin), reaches the service's port in the job's
// running main1, with HTTP and WebSocket (Upgrade) alike. The app sees
// the path without /apps/ID/SERVICE (X-Forwarded-Prefix says it), unless
// the service keeps the prefix; never the caller's Authorization.
func (s *Server) handleApp(w http.ResponseWriter, r *http.Request) {
	id, ok := s.jobID(w, r)
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
	if err := mayControl(r.Context(), j); err != nil {
		writeErr(w, fmt.Errorf("%w: job %d belongs to %s; you may reach only your own jobs' services", ErrForbidden, j.ID, j.User))
		return
	}
	name := r.PathValue("service")
	svc := j.Spec.Service(name)
	if svc == nil {
		writeErr(w, fmt.Errorf("job %d declares no service %q (%s): %w", id, name, serviceNames(j), state.ErrNotFound))
		return
	}
	if _, err := appNode(j); err != nil {
		writeErr(w, err)
		return
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
	backend := appHost(id, j.Requeues, svc.Port)
	rp := &httputil.ReverseProxy{
		Transport: s.appTransport(),
		ErrorLog:  slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetXForwarded()
			u := pr.Out.URL
			u.Scheme, u.Host = "http", backend
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
			var ae *appError
			switch {
			case errors.As(err, &ae), errors.Is(err, state.ErrEnded), errors.Is(err, state.ErrConflict):
				writeJSON(w, http.StatusBadGateway, 0, api.Error{Error: fmt.Sprintf("job %d service %s: %v", id, name, err)})
			default:
				writeErr(w, fmt.Errorf("job %d service %s: %w", id, name, err))
			}
		},
	}
	rp.ServeHTTP(w, r)
}

// serviceNames lists j's services for an error message.
func serviceNames(j *state.Job) string {
	if len(j.Spec.Services) == 0 {
		return "it declares none"
	}
	var b strings.Builder
	b.WriteString("it declares ")
	for i, sv := range j.Spec.Services {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(sv.Name)
	}
	return b.String()
}
