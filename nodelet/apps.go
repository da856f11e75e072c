package nodelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/connlimit"
	"github.com/troupe-hpc/troupe/jobspec"
)

// appDialTimeout bounds connecting to a service's port.
const appDialTimeout = 10 * time.Second

// serveApp answers an app request of schedd's /apps proxy: it connects
// to the service's port on the loopback of main1's network namespace,
// and splices that to schedd's stream after api.AppReady; a request it
// refuses gets "error: why" on the stream instead, one past a cap on
// open streams (takeStream) api.AppBusy and why.
func (a *sessionServer) serveApp(ctx context.Context, r api.AttachRequest) {
	release, busy := a.takeStream(r)
	var app net.Conn
	var why error
	if busy == nil {
		defer release()
		app, why = a.dialApp(ctx, r)
	} else if !errors.Is(busy, connlimit.ErrTooMany) {
		why, busy = busy, nil
	}
	stream, err := a.cli.AttachConnect(ctx, a.cfg.Name, r.ID)
	if err != nil {
		if app != nil {
			app.Close()
		}
		if !client.IsNotFound(err) && ctx.Err() == nil {
			a.log.Warn("connecting an app stream", "job", r.JobID, "port", r.Port, "err", err)
		}
		return
	}
	if busy != nil {
		_, _ = fmt.Fprintf(stream, "%s%v\n", api.AppBusy, busy)
		stream.Close()
		return
	}
	if why != nil {
		_, _ = fmt.Fprintf(stream, "error: %v\n", why)
		stream.Close()
		return
	}
	if _, err := stream.Write([]byte(api.AppReady)); err != nil {
		app.Close()
		stream.Close()
		return
	}
	go func() { <-ctx.Done(); stream.Close() }()
	attach.Splice(stream, app)
}

// dialApp connects to port r.Port of request r's container, which must
// be the job's main1, running here, and declare that port as a service.
// It dials only inside the container's own network namespace: a job
// cannot point it at the node or anything beyond.
func (a *sessionServer) dialApp(ctx context.Context, r api.AttachRequest) (net.Conn, error) {
	if r.Host != jobspec.RoleMain+"1" {
		return nil, fmt.Errorf("job %d: services are served by main1, not %s", r.JobID, r.Host)
	}
	a.mu.Lock()
	t := a.running[key{job: r.JobID, host: r.Host, run: r.Run}]
	a.mu.Unlock()
	if t == nil {
		return nil, fmt.Errorf("job %d has no container %s running on node %s", r.JobID, r.Host, a.cfg.Name)
	}
	if !slices.ContainsFunc(t.job.Spec.Services, func(s api.Service) bool { return s.Port == r.Port }) {
		return nil, fmt.Errorf("job %d declares no service on port %d", r.JobID, r.Port)
	}
	if a.net == nil {
		return nil, fmt.Errorf("node %s runs containers on its own network (no session networks): it serves no apps", a.cfg.Name)
	}
	dctx, cancel := context.WithTimeout(ctx, appDialTimeout)
	defer cancel()
	c, err := a.net.DialLoopback(dctx, t.id(), r.Port)
	if err != nil {
		return nil, fmt.Errorf("job %d %s port %d: %v", r.JobID, r.Host, r.Port, rootCause(err))
	}
	return c, nil
}
