package attach

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketPair is the two ends of a connected unix stream socket, as
// troupe-init and the nodelet hold them.
func socketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	var ends [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatalf("socketpair end %d: %v", i, err)
		}
		// No test waits on a socket for long: a missing frame fails
		// the test rather than hanging it.
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		ends[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	return ends[0], ends[1]
}

// TestFramesRoundTrip: every kind of frame written on one end of a
// socket reads back the same on the other, in order.
func TestFramesRoundTrip(t *testing.T) {
	a, b := socketPair(t)
	go func() {
		_ = WriteData(a, []byte("ls -l\r"))
		_ = WriteWindow(a, 50, 132)
		_ = WriteFrame(a, Close, nil)
		_ = WriteError(a, "job 7 has no terminal")
		_ = WriteExit(a, -9)
		_ = WriteExit(a, 255)
		a.CloseWrite()
	}()
	fr := NewReader(b)
	next := func(typ byte) Frame {
		t.Helper()
		f, err := fr.Next()
		if err != nil {
			t.Fatalf("reading a %q frame: %v", typ, err)
		}
		if f.Type != typ {
			t.Fatalf("frame of type %q, want %q", f.Type, typ)
		}
		return f
	}
	if f := next(Data); string(f.Payload) != "ls -l\r" {
		t.Errorf("data %q", f.Payload)
	}
	rows, cols, err := next(Window).WindowSize()
	if err != nil || rows != 50 || cols != 132 {
		t.Errorf("window %dx%d, %v; want 50x132", rows, cols, err)
	}
	if f := next(Close); len(f.Payload) != 0 {
		t.Errorf("end of input carries %q", f.Payload)
	}
	if f := next(Error); string(f.Payload) != "job 7 has no terminal" {
		t.Errorf("error %q", f.Payload)
	}
	for _, want := range []int{-9, 255} {
		if code, err := next(Exit).ExitCode(); err != nil || code != want {
			t.Errorf("exit %d, %v; want %d", code, err, want)
		}
	}
	if f, err := fr.Next(); err != io.EOF {
		t.Errorf("after the last frame: %v %v, want io.EOF", f, err)
	}
}

// TestWriteDataSplits: a write larger than MaxPayload goes as several
// frames none over the limit, which rejoin to the bytes written; an
// empty write sends nothing.
func TestWriteDataSplits(t *testing.T) {
	p := bytes.Repeat([]byte("0123456789abcdef"), (2*MaxPayload+100)/16+1)
	var buf bytes.Buffer
	if err := WriteData(&buf, nil); err != nil || buf.Len() != 0 {
		t.Fatalf("empty write: %v, %d bytes sent", err, buf.Len())
	}
	if err := WriteData(&buf, p); err != nil {
		t.Fatal(err)
	}
	fr := NewReader(&buf)
	var got []byte
	frames := 0
	for {
		f, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != Data || len(f.Payload) > MaxPayload {
			t.Fatalf("frame %d: type %q, %d bytes", frames, f.Type, len(f.Payload))
		}
		got = append(got, f.Payload...)
		frames++
	}
	if frames != 3 || !bytes.Equal(got, p) {
		t.Errorf("%d frames rejoining to %d bytes; want 3 frames, the %d bytes written", frames, len(got), len(p))
	}
}

// TestOversizedRefused: a frame over MaxPayload is refused by the
// writer (nothing sent) and by the reader; an error message too long
// is cut to fit.
func TestOversizedRefused(t *testing.T) {
	var buf bytes.Buffer
	err := WriteFrame(&buf, Data, make([]byte, MaxPayload+1))
	if err == nil || !strings.Contains(err.Error(), "exceeds") || buf.Len() != 0 {
		t.Errorf("writing %d bytes: %v, %d bytes sent", MaxPayload+1, err, buf.Len())
	}

	var hdr [5]byte
	hdr[0] = Data
	binary.BigEndian.PutUint32(hdr[1:], MaxPayload+1)
	if _, err := NewReader(bytes.NewReader(hdr[:])).Next(); !errors.Is(err, ErrBadFrame) {
		t.Errorf("reading a %d-byte header: %v, want ErrBadFrame", MaxPayload+1, err)
	}

	buf.Reset()
	if err := WriteError(&buf, strings.Repeat("x", MaxPayload+10)); err != nil {
		t.Fatal(err)
	}
	if f, err := NewReader(&buf).Next(); err != nil || f.Type != Error || len(f.Payload) != MaxPayload {
		t.Errorf("long error: %q frame of %d bytes, %v", f.Type, len(f.Payload), err)
	}
}

// TestTruncatedStream: a stream that ends between frames is a clean
// io.EOF; one that ends inside a header or a payload is
// io.ErrUnexpectedEOF, so a cut connection is never taken for a
// clean end.
func TestTruncatedStream(t *testing.T) {
	var whole bytes.Buffer
	if err := WriteData(&whole, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		n    int
		want error
	}{
		{"empty", 0, io.EOF},
		{"inside the header", 3, io.ErrUnexpectedEOF},
		{"inside the payload", 7, io.ErrUnexpectedEOF},
	} {
		_, err := NewReader(bytes.NewReader(whole.Bytes()[:tc.n])).Next()
		if err != tc.want {
			t.Errorf("%s (%d of %d bytes): %v, want %v", tc.name, tc.n, whole.Len(), err, tc.want)
		}
	}
}

// TestDecodeWrongFrame: WindowSize and ExitCode refuse a frame of
// another type or of the wrong length, naming what they decoded.
func TestDecodeWrongFrame(t *testing.T) {
	for _, f := range []Frame{
		{Type: Window, Payload: []byte{0, 24, 0}},
		{Type: Data, Payload: []byte{0, 24, 0, 80}},
	} {
		if _, _, err := f.WindowSize(); !errors.Is(err, ErrBadFrame) || !strings.Contains(err.Error(), "window size") {
			t.Errorf("WindowSize of %q %v: %v", f.Type, f.Payload, err)
		}
	}
	for _, f := range []Frame{
		{Type: Exit, Payload: []byte{0, 0, 1}},
		{Type: Error, Payload: []byte{0, 0, 0, 1}},
	} {
		if _, err := f.ExitCode(); !errors.Is(err, ErrBadFrame) || !strings.Contains(err.Error(), "exit status") {
			t.Errorf("ExitCode of %q %v: %v", f.Type, f.Payload, err)
		}
	}
}

// TestSpliceBothWays: Splice carries bytes each way between two
// connections and, when one side hangs up, closes both, so the other
// side's reader sees the end.
func TestSpliceBothWays(t *testing.T) {
	client, a := socketPair(t)
	b, init := socketPair(t)
	done := make(chan struct{})
	go func() { Splice(a, b); close(done) }()

	if err := WriteData(client, []byte("keys")); err != nil {
		t.Fatal(err)
	}
	if f, err := NewReader(init).Next(); err != nil || string(f.Payload) != "keys" {
		t.Fatalf("client → init: %q %v", f.Payload, err)
	}
	if err := WriteExit(init, 3); err != nil {
		t.Fatal(err)
	}
	fr := NewReader(client)
	if f, err := fr.Next(); err != nil || f.Type != Exit {
		t.Fatalf("init → client: %q %v", f.Type, err)
	}

	init.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Splice still runs 10s after one side hung up")
	}
	if f, err := fr.Next(); err != io.EOF {
		t.Errorf("client after the hang-up: %q %v, want io.EOF", f.Type, err)
	}
}
