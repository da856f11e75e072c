package httpapi

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/sched/fault"
)

// attach serves POST /v1/jobs/{id}/attach: the caller (the job's owner
// or an admin, Controller.Attach decides) gets the terminal of its
// container ?host= (main1) once the container's nodelet connected.
func (a *API) attach(w http.ResponseWriter, r *http.Request) {
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
	if !strings.EqualFold(r.Header.Get("Upgrade"), attach.Upgrade) {
		writeErr(w, fmt.Errorf("%w: attach needs the header Upgrade: %s", fault.ErrInvalid, attach.Upgrade))
		return
	}
	nc, err := a.c.Attach(r.Context(), id, r.URL.Query().Get("host"))
	if err != nil {
		if r.Context().Err() == nil {
			writeErr(w, err)
		}
		return
	}
	cc, brw, err := upgrade(w)
	if err != nil {
		nc.Close()
		a.log.Warn("attach: upgrading the client's connection", "job", id, "err", err)
		return
	}
	attach.Splice(attach.Buffered(cc, brw.Reader), nc)
}

// attachPoll serves GET /v1/nodes/{name}/attach: the node's attach
// requests, waiting up to ?wait= (30s) for one.
func (a *API) attachPoll(w http.ResponseWriter, r *http.Request) {
	wait, err := parseDuration(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	reqs := a.c.AttachRequests(r.Context(), r.PathValue("name"), wait)
	if r.Context().Err() != nil {
		return
	}
	writeJSON(w, http.StatusOK, 0, api.AttachRequests{Requests: reqs})
}

// attachConnect serves POST /v1/nodes/{name}/attach/{req}: the
// nodelet's end of a request, handed to the client waiting for it.
func (a *API) attachConnect(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), attach.Upgrade) {
		writeErr(w, fmt.Errorf("%w: attach needs the header Upgrade: %s", fault.ErrInvalid, attach.Upgrade))
		return
	}
	deliver, err := a.c.AttachConnect(r.PathValue("name"), r.PathValue("req"))
	if err != nil {
		writeErr(w, err)
		return
	}
	nc, brw, err := upgrade(w)
	if err != nil {
		a.log.Warn("attach: upgrading the nodelet's connection", "err", err)
		return
	}
	deliver(attach.Buffered(nc, brw.Reader))
}

// upgrade answers 101 Switching Protocols and takes the connection over.
func upgrade(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	if _, err := brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + attach.Upgrade + "\r\n\r\n"); err != nil {
		nc.Close()
		return nil, nil, err
	}
	if err := brw.Flush(); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, brw, nil
}
