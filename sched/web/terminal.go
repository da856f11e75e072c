package web

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/websocket"

	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/auth"
)

// The terminal: GET /v1/jobs/{id}/terminal?host=main1 upgrades to a
// WebSocket that carries the job's attach stream (internal/attach), the
// one battach speaks, one frame per binary message:
//
//	browser → schedd   'd' keystrokes, 'w' window size, 'c' end of input
//	schedd → browser   'd' output, 'x' exit status, 'e' why not
//
// schedd checks each message from the browser is exactly one such frame
// before passing it on; the rest it relays as it comes. The session's
// user must be allowed to attach as with battach (the job's owner or an
// admin: sched.Server.Attach decides), and the handshake must come from
// this page (Origin); a refusal after the handshake comes as an 'e'
// frame, which the page shows. Closing the socket detaches: the job goes
// on.

func (p *page) terminal(w http.ResponseWriter, r *http.Request, s *session, id auth.Identity) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/jobs/")
	job, err := strconv.ParseUint(strings.TrimSuffix(rest, "/terminal"), 10, 64)
	switch {
	case r.Method != http.MethodGet:
		w.Header().Set("Allow", "GET")
		httpError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: the terminal is a WebSocket (GET)", r.Method, r.URL.Path))
		return
	case err != nil || job == 0:
		httpError(w, http.StatusNotFound, fmt.Errorf("%s: not a job's terminal (/v1/jobs/ID/terminal)", r.URL.Path))
		return
	case s == nil:
		httpError(w, http.StatusUnauthorized, fmt.Errorf("%s: log in first: a terminal is for the job's owner", r.URL.Path))
		return
	case r.Header.Get("Origin") == "" || !sameOrigin(r):
		// Browsers always send Origin on a WebSocket handshake.
		httpError(w, http.StatusForbidden, fmt.Errorf("%s: the WebSocket handshake must come from this page (Origin %q)", r.URL.Path, r.Header.Get("Origin")))
		return
	}
	host := r.URL.Query().Get("host")
	websocket.Server{
		Handshake: func(*websocket.Config, *http.Request) error { return nil }, // Origin checked above
		Handler: func(ws *websocket.Conn) {
			ws.PayloadType = websocket.BinaryFrame
			ws.MaxPayloadBytes = 5 + attach.MaxPayload
			p.bridge(ws, r.WithContext(auth.WithIdentity(r.Context(), id)), job, host)
		},
	}.ServeHTTP(w, r)
}

// bridge carries the attach stream of job's host between ws and schedd.
func (p *page) bridge(ws *websocket.Conn, r *http.Request, job uint64, host string) {
	defer ws.Close()
	ctx := r.Context()
	nc, err := p.b.Attach(ctx, job, host)
	if err != nil {
		_ = websocket.Message.Send(ws, frame(attach.Error, []byte(err.Error())))
		return
	}
	var once sync.Once
	stop := func() { once.Do(func() { nc.Close(); ws.Close() }) }
	defer stop()
	go func() {
		<-ctx.Done() // schedd stopping, or the handler returned
		stop()
	}()
	go func() {
		defer stop()
		for {
			var msg []byte
			if err := websocket.Message.Receive(ws, &msg); err != nil {
				return
			}
			if err := checkFrame(msg); err != nil {
				_ = websocket.Message.Send(ws, frame(attach.Error, []byte(err.Error())))
				return
			}
			if _, err := nc.Write(msg); err != nil {
				return
			}
		}
	}()
	fr := attach.NewReader(nc)
	for {
		f, err := fr.Next()
		if err != nil {
			return
		}
		if err := websocket.Message.Send(ws, frame(f.Type, f.Payload)); err != nil {
			return
		}
	}
}

// checkFrame accepts exactly one frame the client end may send.
func checkFrame(msg []byte) error {
	if len(msg) < 5 {
		return fmt.Errorf("terminal: a %d-byte message is not a frame", len(msg))
	}
	n := binary.BigEndian.Uint32(msg[1:5])
	if int64(n) != int64(len(msg)-5) {
		return fmt.Errorf("terminal: the frame says %d bytes, the message holds %d", n, len(msg)-5)
	}
	switch msg[0] {
	case attach.Data, attach.Close:
	case attach.Window:
		if n != 4 {
			return errors.New("terminal: a window-size frame holds 4 bytes")
		}
	default:
		return fmt.Errorf("terminal: frame type %q may not come from the browser", msg[0])
	}
	return nil
}

// frame encodes one attach frame.
func frame(typ byte, payload []byte) []byte {
	var b bytes.Buffer
	_ = attach.WriteFrame(&b, typ, payload)
	return b.Bytes()
}
