package sched

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/sched/fault"
	"github.com/troupe-hpc/troupe/sched/httpapi"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// AppsPrefix is where schedd serves the jobs' services (httpapi.AppsPrefix).
const AppsPrefix = httpapi.AppsPrefix

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
func (s *sessions) appTransport() *http.Transport {
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

// dialApp opens a stream to a service's port: the nodelet of the job's
// main1 (of that run) is asked through its attach long-poll, connects
// its end, and says api.AppReady once it reached the port.
func (s *sessions) dialApp(ctx context.Context, _, addr string) (net.Conn, error) {
	id, run, port, err := parseAppHost(addr)
	if err != nil {
		return nil, err
	}
	host := jobspec.RoleMain + "1"
	j := s.st.Snapshot().Job(id)
	if j == nil || j.Requeues != run {
		return nil, &httpapi.AppError{Msg: fmt.Sprintf("job %d (run %d) is gone", id, run)}
	}
	node, err := appNode(j)
	if err != nil {
		return nil, &httpapi.AppError{Msg: err.Error()}
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
		return nil, fmt.Errorf("%w: node %s did not connect job %d's port %d within %s", fault.ErrUnavailable, node, id, port, attachAnswer)
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
		return nil, fmt.Errorf("%w: node %s: job %d's port %d: %v", fault.ErrUnavailable, node, id, port, err)
	}
	if why, ok := strings.CutPrefix(line, api.AppBusy); ok {
		nc.Close()
		return nil, fmt.Errorf("%w: node %s: %s", fault.ErrTooMany, node, strings.TrimSpace(why))
	}
	if line != api.AppReady {
		nc.Close()
		return nil, &httpapi.AppError{Msg: fmt.Sprintf("node %s: %s", node, strings.TrimPrefix(strings.TrimSpace(line), "error: "))}
	}
	return attach.Buffered(nc, br), nil
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

// App resolves job id's service name for the /apps proxy: the caller
// must own the job (or be an admin), and its main1 must run; only the
// leader serves services. An upgraded request (a WebSocket) counts as a
// stream until it ends (App.Release); past a cap it is refused with
// fault.ErrTooMany. A plain request is not a stream: it holds the
// caller's connection, which the listener's guard counts, and borrows a
// pooled connection to the nodelet for its answer.
func (s *sessions) App(ctx context.Context, id uint64, name string, upgrade bool) (httpapi.App, error) {
	if !s.IsLeader() {
		return httpapi.App{}, fmt.Errorf("%w: apps are served by the leader (%s)", raftlog.ErrNotLeader, s.leaderAPI())
	}
	j := s.st.Snapshot().Job(id)
	if j == nil {
		return httpapi.App{}, fmt.Errorf("job %d: %w", id, state.ErrNotFound)
	}
	if err := mayControl(ctx, j, doReach); err != nil {
		return httpapi.App{}, err
	}
	svc := j.Spec.Service(name)
	if svc == nil {
		return httpapi.App{}, fmt.Errorf("job %d declares no service %q (%s): %w", id, name, serviceNames(j), state.ErrNotFound)
	}
	if _, err := appNode(j); err != nil {
		return httpapi.App{}, err
	}
	app := httpapi.App{Backend: appHost(id, j.Requeues, svc.Port), KeepPrefix: svc.KeepPrefix, Transport: s.appTransport()}
	if upgrade {
		// It holds the caller's connection and a stream from the
		// nodelet for as long as it is open: capped with the terminals
		// (streams.go).
		release, err := s.takeStream(ctx, id)
		if err != nil {
			return httpapi.App{}, err
		}
		app.Release = release
	}
	return app, nil
}
