package web_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/sched"
	"github.com/troupe-hpc/troupe/sched/web"
)

// pipeBackend is the real controller, with each attach answered by the
// test's end of a pipe in place of a nodelet.
type pipeBackend struct {
	*sched.Server
	far chan net.Conn
}

func (b pipeBackend) Attach(ctx context.Context, job uint64, host string) (net.Conn, error) {
	near, far := net.Pipe()
	b.far <- far
	return near, nil
}

// The bridge passes the browser's frames through unchanged, one per
// message, and the attach stream's back; a message that is not one
// frame a client may send ends the terminal with an error frame.
func TestTerminalBridge(t *testing.T) {
	srv, _, _ := schedd(t)
	_, secret := token(t, srv, 1000, "alice")
	b := pipeBackend{Server: srv, far: make(chan net.Conn, 1)}
	ts := httptest.NewServer(web.Handler(b, web.Output{}))
	defer ts.Close()
	c := newClient(t, ts.URL)
	c.login(secret)
	dial := func() (*websocket.Conn, net.Conn) {
		t.Helper()
		cfg, err := websocket.NewConfig("ws"+strings.TrimPrefix(ts.URL, "http")+"/v1/jobs/7/terminal", ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Header = http.Header{"Cookie": {c.name + "=" + c.cookie}}
		ws, err := websocket.DialConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case far := <-b.far:
			_ = far.SetDeadline(time.Now().Add(10 * time.Second))
			return ws, far
		case <-time.After(10 * time.Second):
			t.Fatal("the bridge did not attach")
			return nil, nil
		}
	}
	enc := func(typ byte, p []byte) []byte {
		var buf bytes.Buffer
		_ = attach.WriteFrame(&buf, typ, p)
		return buf.Bytes()
	}

	ws, far := dial()
	fr := attach.NewReader(far)
	for _, f := range []attach.Frame{{Type: attach.Window, Payload: []byte{0, 33, 0, 111}}, {Type: attach.Data, Payload: []byte("hostname\r")}, {Type: attach.Close, Payload: []byte{}}} {
		if err := websocket.Message.Send(ws, enc(f.Type, f.Payload)); err != nil {
			t.Fatal(err)
		}
		got, err := fr.Next()
		if err != nil || got.Type != f.Type || !bytes.Equal(got.Payload, f.Payload) {
			t.Fatalf("the attach stream got %q %q (%v), want %q %q", got.Type, got.Payload, err, f.Type, f.Payload)
		}
	}
	// Back: output and the exit status, a message each.
	go func() {
		_ = attach.WriteData(far, []byte("main1\r\n"))
		_ = attach.WriteExit(far, 3)
	}()
	for _, want := range [][]byte{enc(attach.Data, []byte("main1\r\n")), enc(attach.Exit, []byte{0, 0, 0, 3})} {
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err != nil || !bytes.Equal(msg, want) {
			t.Fatalf("the browser got %q (%v), want %q", msg, err, want)
		}
	}
	ws.Close()

	for name, msg := range map[string][]byte{
		"short":                  {'d', 0, 0},
		"length too big":         append([]byte{'d', 0, 0, 0, 9}, "abc"...),
		"two frames":             append(enc(attach.Data, []byte("a")), enc(attach.Data, []byte("b"))...),
		"exit from the browser":  enc(attach.Exit, []byte{0, 0, 0, 0}),
		"error from the browser": enc(attach.Error, []byte("fake")),
		"bad window":             enc(attach.Window, []byte{0, 1}),
	} {
		ws, far := dial()
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatal(err)
		}
		var back []byte
		if err := websocket.Message.Receive(ws, &back); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(back) < 5 || back[0] != attach.Error || int(binary.BigEndian.Uint32(back[1:5])) != len(back)-5 {
			t.Errorf("%s: the browser got %q, want an error frame", name, back)
		}
		// Nothing reached the attach stream, and it is closed.
		if f, err := attach.NewReader(far).Next(); err == nil {
			t.Errorf("%s: the attach stream got %q %q", name, f.Type, f.Payload)
		}
		ws.Close()
	}
}
