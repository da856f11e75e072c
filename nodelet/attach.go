package nodelet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/client"
)

// attachWait is how long one attach long-poll waits at schedd.
const attachWait = 30 * time.Second

// socketWait bounds how long a request waits for a just-started
// container's attach socket to appear.
const socketWait = 5 * time.Second

// attachLoop serves schedd's terminal attach requests (bsub -I,
// battach) until ctx ends: for each, it connects schedd's stream to the
// attach socket troupe-init serves the container's terminal on.
func (a *agent) attachLoop(ctx context.Context) {
	b := newBackoff()
	for ctx.Err() == nil {
		rs, err := a.cli.AttachRequests(ctx, a.cfg.Name, attachWait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("attach requests query failed", "err", err)
			b.sleep(ctx)
			continue
		}
		b.reset()
		for _, r := range rs.Requests {
			go a.serveAttach(ctx, r)
		}
	}
}

// serveAttach answers one attach request; a container without a
// terminal gets the client an error frame that says why.
func (a *agent) serveAttach(ctx context.Context, r api.AttachRequest) {
	sock, why := a.terminalOf(r)
	var term net.Conn
	if why == nil {
		var err error
		// troupe-init opens the socket just after the container starts.
		for deadline := time.Now().Add(socketWait); ; time.Sleep(20 * time.Millisecond) {
			term, err = attach.Dial(sock)
			if err == nil || !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			why = fmt.Errorf("job %d %s: no terminal to attach to (%v)", r.JobID, r.Host, errors.Unwrap(err))
		}
	}
	stream, err := a.cli.AttachConnect(ctx, a.cfg.Name, r.ID)
	if err != nil {
		if term != nil {
			term.Close()
		}
		if !client.IsNotFound(err) && ctx.Err() == nil {
			a.log.Warn("connecting an attach stream", "job", r.JobID, "host", r.Host, "err", err)
		}
		return
	}
	if why != nil {
		_ = attach.WriteError(stream, why.Error())
		stream.Close()
		return
	}
	a.log.Info("terminal attached", "job", r.JobID, "host", r.Host)
	go func() { <-ctx.Done(); stream.Close() }()
	attach.Splice(stream, term)
}

// terminalOf finds the attach socket of request r's container.
func (a *agent) terminalOf(r api.AttachRequest) (string, error) {
	a.mu.Lock()
	t := a.running[key{job: r.JobID, host: r.Host, run: r.Run}]
	a.mu.Unlock()
	if t == nil {
		return "", fmt.Errorf("job %d has no container %s running on node %s", r.JobID, r.Host, a.cfg.Name)
	}
	p := t.terminal.Load()
	if p == nil {
		return "", fmt.Errorf("job %d %s has no terminal (yet)", r.JobID, r.Host)
	}
	return *p, nil
}
