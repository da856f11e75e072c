package connlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/eventually"
)

// TestStreamsCaps: past the cap per job, per user or in all, Acquire
// refuses with ErrTooMany and a message naming the cap's flag; release
// frees the place, once however often it is called.
func TestStreamsCaps(t *testing.T) {
	total := 4
	s := &Streams{Daemon: "schedd", PerJob: 2, PerUser: 3, Total: func() int { return total }}
	take := func(uid int, job uint64) func() {
		t.Helper()
		r, err := s.Acquire(uid, fmt.Sprint("u", uid), job)
		if err != nil {
			t.Fatalf("Acquire(uid %d, job %d): %v", uid, job, err)
		}
		return r
	}
	refused := func(uid int, job uint64, want string) {
		t.Helper()
		if _, err := s.Acquire(uid, fmt.Sprint("u", uid), job); !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), want) {
			t.Errorf("Acquire(uid %d, job %d) = %v, want ErrTooMany naming %s", uid, job, err, want)
		}
	}
	r1 := take(1, 10)
	take(1, 10)
	refused(1, 10, "--max-streams-per-job")
	take(1, 11)
	refused(1, 12, "--max-streams-per-user")
	take(2, 20)
	refused(2, 21, "--max-streams") // all together: 4
	r1()
	r1() // a second call frees nothing more
	if j, u, all := s.Open(1, 10); j != 1 || u != 2 || all != 3 {
		t.Errorf("after one release: job %d user %d all %d, want 1 2 3", j, u, all)
	}
	take(1, 10)
	refused(1, 10, "--max-streams-per-job")
	total = 0 // no cap in all
	take(3, 30)
}

// guarded serves on a loopback listener behind g: /node marks its
// connection as a node's, every path answers its name; Admit runs first.
func guarded(t *testing.T, g *Guard) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{ConnState: g.ConnState, ConnContext: g.ConnContext,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			node := r.URL.Path == "/node"
			if err := g.Admit(r.Context(), node); err != nil {
				w.Header().Set("Connection", "close")
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			if node {
				MarkNode(r.Context())
			}
			fmt.Fprint(w, r.URL.Path)
		})}
	go func() { _ = hs.Serve(g.Listen(ln)) }()
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// request sends GET path on conn and returns the status.
func request(t *testing.T, conn net.Conn, br *bufio.Reader, path string) int {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestGuardKeepsReserve: under a limit of open files (here a pretended
// one, 20 above what the process had), users' requests are refused with
// the connection closed once only the reserve is left, and users' idle
// connections are closed at accept to keep it; a node's connection is
// never closed and its requests are always served.
func TestGuardKeepsReserve(t *testing.T) {
	g := NewGuard(8)
	limit := g.base + 20
	g.Limit = func() int { return limit }
	var shed atomic.Int64
	g.Shed = func(n, _ int) { shed.Add(int64(n)) }
	addr := guarded(t, g)
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	node := dial()
	nodeBR := bufio.NewReader(node)
	if code := request(t, node, nodeBR, "/node"); code != http.StatusOK {
		t.Fatalf("the node's first request: %d", code)
	}
	var idle []net.Conn
	for range 11 {
		idle = append(idle, dial())
	}
	eventually.True(t, 10*time.Second, "12 connections counted", func() bool { return g.Used() == g.base+12 })

	// Only the reserve left: a user's request is refused, its
	// connection closed; a node's first request on a new connection
	// goes through.
	user := dial()
	ubr := bufio.NewReader(user)
	if code := request(t, user, ubr, "/jobs"); code != http.StatusServiceUnavailable {
		t.Errorf("a user's request with only the reserve left: %d, want 503", code)
	}
	if _, err := ubr.ReadByte(); err == nil {
		t.Error("the refused user's connection stayed open")
	}
	node2 := dial()
	if code := request(t, node2, bufio.NewReader(node2), "/node"); code != http.StatusOK {
		t.Errorf("a node's request on a new connection: %d, want 200", code)
	}

	// A flood of idle connections: the oldest are closed at accept, the
	// count stays clear of the limit, the nodes' connections stay.
	for range 30 {
		idle = append(idle, dial())
	}
	eventually.True(t, 10*time.Second, "idle connections shed", func() bool { return shed.Load() > 0 })
	eventually.True(t, 10*time.Second, "the count back under the limit less half the reserve", func() bool { return g.Used() <= limit-4 })
	_ = idle[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err == nil {
		t.Error("the oldest idle connection was not closed")
	}
	if code := request(t, node, nodeBR, "/node"); code != http.StatusOK {
		t.Errorf("the node's connection after the flood: %d, want 200", code)
	}
}

// fakeListener hands out what its channel holds.
type fakeListener struct{ next chan any }

func (l *fakeListener) Accept() (net.Conn, error) {
	switch v := (<-l.next).(type) {
	case net.Conn:
		return v, nil
	default:
		return nil, v.(error)
	}
}
func (l *fakeListener) Close() error   { return nil }
func (l *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

// TestGuardAcceptEMFILE: when accept itself fails for want of
// descriptors, the oldest idle user connection is closed, so that the
// server's next try finds one.
func TestGuardAcceptEMFILE(t *testing.T) {
	g := NewGuard(8)
	g.Limit = func() int { return 1 << 20 } // far: only the failure sheds
	fl := &fakeListener{next: make(chan any, 4)}
	ln := g.Listen(fl)
	var peers []net.Conn
	for range 2 {
		a, b := net.Pipe()
		peers = append(peers, b)
		fl.next <- a
		if _, err := ln.Accept(); err != nil {
			t.Fatal(err)
		}
	}
	fl.next <- fmt.Errorf("accept: %w", syscall.EMFILE)
	if _, err := ln.Accept(); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("Accept = %v, want EMFILE passed on", err)
	}
	_ = peers[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := peers[0].Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("the oldest idle connection: read %v, want it closed", err)
	}
	if g.Used() != g.base+1 {
		t.Errorf("%d connections counted, want 1", g.Used()-g.base)
	}
}
