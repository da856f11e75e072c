package attach

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/eventually"
)

// served is a Server on a real pseudo-terminal, listening on a unix
// socket, as troupe-init runs it; tty is the side the command holds.
type served struct {
	srv        *Server
	tty        *os.File
	path       string
	transcript *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func serve(t *testing.T) *served {
	t.Helper()
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Skipf("SKIP: no pseudo-terminal here to serve: %v", err)
	}
	// Canonical mode (lines, ^D) as a shell's terminal, without echo so
	// that what the clients read is only what the command wrote.
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	s := &served{tty: tty, path: filepath.Join(t.TempDir(), SocketName), transcript: &syncBuffer{}}
	s.srv = NewServer(ptm, s.transcript)
	ln, err := net.Listen("unix", s.path)
	if err != nil {
		t.Fatal(err)
	}
	pumped := make(chan struct{})
	go func() { _ = s.srv.Serve(ln) }()
	go func() { s.srv.Pump(); close(pumped) }()
	// The master side is left to the garbage collector: a client's
	// handler may still be setting its window size as the test ends,
	// as it may in troupe-init until the process exits.
	t.Cleanup(func() {
		ln.Close()
		tty.Close() // the terminal's master reads EIO: Pump ends
		<-pumped
	})
	return s
}

// client is one attached connection, read with a deadline.
type client struct {
	t  *testing.T
	c  net.Conn
	fr *Reader
}

func (s *served) attach(t *testing.T) *client {
	t.Helper()
	c, err := net.Dial("unix", s.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, fr: NewReader(c)}
}

func (c *client) next() Frame {
	c.t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := c.fr.Next()
	if err != nil {
		c.t.Fatalf("reading a frame: %v", err)
	}
	return f
}

// output reads data frames until what they carried contains want.
func (c *client) output(want string) string {
	c.t.Helper()
	var got []byte
	for !bytes.Contains(got, []byte(want)) {
		f := c.next()
		if f.Type != Data {
			c.t.Fatalf("a %q frame before the output %q (had %q)", f.Type, want, got)
		}
		got = append(got, f.Payload...)
	}
	return string(got)
}

// exit reads the exit status frame and then the end of the stream.
func (c *client) exit() int {
	c.t.Helper()
	f := c.next()
	code, err := f.ExitCode()
	if err != nil {
		c.t.Fatalf("%q frame where the exit status was due: %v", f.Type, err)
	}
	_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if f, err := c.fr.Next(); err != io.EOF {
		c.t.Fatalf("after the exit status: %q %v, want the end of the stream", f.Type, err)
	}
	return code
}

func (c *client) send(typ byte, p []byte) {
	c.t.Helper()
	if err := WriteFrame(c.c, typ, p); err != nil {
		c.t.Fatal(err)
	}
}

// readTTY reads what the command would: one read of the terminal. The
// terminal is in blocking mode (its size was read through its
// descriptor), so the read runs aside and the wait is bounded here.
func readTTY(t *testing.T, tty *os.File) (string, error) {
	t.Helper()
	type read struct {
		s   string
		err error
	}
	ch := make(chan read, 1)
	go func() {
		buf := make([]byte, 4096)
		n, err := tty.Read(buf)
		ch <- read{string(buf[:n]), err}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("the command's read of its terminal still waits after 10s")
		return "", nil
	}
}

// TestServerSharesTheTerminal: the first client's first frame lets the
// command start; its window size becomes the terminal's; input from
// any client reaches the command, output reaches every client and the
// transcript; a client that comes later is first shown the output so
// far; end of input is the terminal's ^D; Finish gives every client the
// exit status and ends their streams.
func TestServerSharesTheTerminal(t *testing.T) {
	s := serve(t)
	select {
	case <-s.srv.Attached():
		t.Fatal("attached before any client came")
	default:
	}
	c1 := s.attach(t)
	c1.send(Window, []byte{0, 30, 0, 100})
	select {
	case <-s.srv.Attached():
	case <-time.After(10 * time.Second):
		t.Fatal("a client told its window size but the server never reported it attached")
	}
	eventually.Equal(t, 10*time.Second, "the terminal's size after the client's window frame",
		"30x100", func() string {
			ws, err := pty.GetsizeFull(s.tty)
			if err != nil {
				return err.Error()
			}
			return fmt.Sprintf("%dx%d", ws.Rows, ws.Cols)
		})

	// A zero size is no size: ignored. Frames are handled in order, so
	// once the line after it is read the size is known to be kept.
	c1.send(Window, []byte{0, 0, 0, 0})
	c1.send(Data, []byte("first line\n"))
	if got, err := readTTY(t, s.tty); err != nil || got != "first line\n" {
		t.Fatalf("the command read %q %v", got, err)
	}
	if rows, cols, err := pty.Getsize(s.tty); err != nil || rows != 30 || cols != 100 {
		t.Errorf("after a 0x0 window frame the terminal is %dx%d %v, want 30x100 kept", rows, cols, err)
	}

	if _, err := s.tty.Write([]byte("prompt$ ")); err != nil {
		t.Fatal(err)
	}
	c1.output("prompt$ ")

	c2 := s.attach(t)
	if got := c2.output("prompt$ "); got != "prompt$ " {
		t.Errorf("a late client's replay is %q, want the output so far", got)
	}
	c2.send(Data, []byte("from two\n"))
	if got, err := readTTY(t, s.tty); err != nil || got != "from two\n" {
		t.Fatalf("the command read %q %v from the second client", got, err)
	}
	if _, err := s.tty.Write([]byte("both\n")); err != nil {
		t.Fatal(err)
	}
	c1.output("both")
	c2.output("both")

	c1.send(Close, nil)
	if got, err := readTTY(t, s.tty); got != "" || (err != nil && err != io.EOF) {
		t.Fatalf("after the end-of-input frame the command read %q %v, want the end of its input", got, err)
	}

	s.srv.Finish(7)
	if code := c1.exit(); code != 7 {
		t.Errorf("first client's exit status %d, want 7", code)
	}
	if code := c2.exit(); code != 7 {
		t.Errorf("second client's exit status %d, want 7", code)
	}
	c3 := s.attach(t)
	c3.output("both")
	if code := c3.exit(); code != 7 {
		t.Errorf("a client after the end: exit status %d, want 7", code)
	}
	if got, want := s.transcript.String(), "prompt$ both\r\n"; got != want {
		t.Errorf("transcript %q, want %q", got, want)
	}
}

// TestServerReplaysTheTail: a client attaching after much output is
// shown only the most recent replaySize bytes, ending with the latest.
func TestServerReplaysTheTail(t *testing.T) {
	s := serve(t)
	c1 := s.attach(t)
	c1.send(Window, []byte{0, 24, 0, 80})
	<-s.srv.Attached()
	out := strings.Repeat("x", 3*replaySize) + "END"
	go func() { _, _ = s.tty.Write([]byte(out)) }()
	c1.output("END")

	c2 := s.attach(t)
	got := c2.output("END")
	if len(got) != replaySize || !strings.HasSuffix(got, "xEND") {
		t.Errorf("replay of %d bytes ending %q, want the last %d ending in END", len(got), got[max(0, len(got)-8):], replaySize)
	}
}

// TestServerDropsBadClient: a client that sends a malformed frame is
// disconnected; the others stay attached.
func TestServerDropsBadClient(t *testing.T) {
	s := serve(t)
	good := s.attach(t)
	good.send(Window, []byte{0, 24, 0, 80})
	bad := s.attach(t)
	if _, err := bad.c.Write([]byte{Data, 0xff, 0xff, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	_ = bad.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := bad.fr.Next(); err != io.EOF && !errors.Is(err, unix.ECONNRESET) {
		t.Fatalf("a client that sent a malformed frame reads %v, want its stream ended", err)
	}
	if _, err := s.tty.Write([]byte("still here\n")); err != nil {
		t.Fatal(err)
	}
	good.output("still here")
}
