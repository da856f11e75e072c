package nodelet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/connlimit"
	"github.com/troupe-hpc/troupe/nodelet/report"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// attachWait is how long one attach long-poll waits at schedd.
const attachWait = 30 * time.Second

// socketWait bounds how long a request waits for a just-started
// container's attach socket to appear.
const socketWait = 5 * time.Second

// attachLoop serves schedd's terminal attach requests (bsub -I,
// battach), and its app requests (serveApp), until ctx ends: for each, it connects schedd's stream to the
// attach socket troupe-init serves the container's terminal on. That
// socket is the runtime's, in a root-owned directory no container can
// see; the runtime connects only to the container's own init
// (runtime.Terminal).
func (a *sessionServer) attachLoop(ctx context.Context) {
	b := report.Backoff()
	for ctx.Err() == nil {
		rs, err := a.cli.AttachRequests(ctx, a.cfg.Name, attachWait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("attach requests query failed", "err", err)
			_ = b.Wait(ctx)
			continue
		}
		b.Reset()
		for _, r := range rs.Requests {
			if r.Port != 0 {
				go a.serveApp(ctx, r)
				continue
			}
			go a.serveAttach(ctx, r)
		}
	}
}

// serveAttach answers one attach request; a container without a
// terminal gets the client an error frame that says why.
func (a *sessionServer) serveAttach(ctx context.Context, r api.AttachRequest) {
	var tc runtime.Terminal
	release, why := a.takeStream(r)
	if why == nil {
		defer release()
		tc, why = a.terminalOf(r)
	}
	var term net.Conn
	if why == nil {
		var err error
		// troupe-init listens just after the container starts.
		for deadline := time.Now().Add(socketWait); ; time.Sleep(20 * time.Millisecond) {
			term, err = tc.DialTerminal()
			notYet := errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)
			if err == nil || !notYet || time.Now().After(deadline) {
				break
			}
		}
		switch {
		case errors.Is(err, attach.ErrUntrusted):
			a.log.Error("attach socket not trusted, not connecting", "job", r.JobID, "host", r.Host, "err", err)
			why = fmt.Errorf("job %d %s: no terminal to attach to", r.JobID, r.Host)
		case err != nil:
			why = fmt.Errorf("job %d %s: no terminal to attach to (%v)", r.JobID, r.Host, rootCause(err))
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

// rootCause is the innermost error of a chain of single wraps.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// terminalOf finds the terminal of request r's container.
func (a *sessionServer) terminalOf(r api.AttachRequest) (runtime.Terminal, error) {
	a.mu.Lock()
	t := a.running[key{job: r.JobID, host: r.Host, run: r.Run}]
	a.mu.Unlock()
	if t == nil {
		return nil, fmt.Errorf("job %d has no container %s running on node %s", r.JobID, r.Host, a.cfg.Name)
	}
	p := t.terminal.Load()
	if p == nil {
		return nil, fmt.Errorf("job %d %s has no terminal (yet)", r.JobID, r.Host)
	}
	return *p, nil
}

// newStreams is the counter of cfg's caps on terminal and app streams.
func newStreams(cfg Config) *connlimit.Streams {
	return connlimit.NewStreams("nodelet "+cfg.Name, cfg.MaxStreamsPerJob, cfg.MaxStreamsPerUser, cfg.MaxStreams, 0, nil)
}

// takeStream takes a slot for request r's stream, counted for its job
// and the job's owner; release frees it. The job must run here.
func (a *sessionServer) takeStream(r api.AttachRequest) (release func(), err error) {
	a.mu.Lock()
	t := a.running[key{job: r.JobID, host: r.Host, run: r.Run}]
	a.mu.Unlock()
	if t == nil {
		return nil, fmt.Errorf("job %d has no container %s running on node %s", r.JobID, r.Host, a.cfg.Name)
	}
	if a.streams == nil {
		return func() {}, nil
	}
	return a.streams.Acquire(t.job.UID, t.job.User, r.JobID)
}
