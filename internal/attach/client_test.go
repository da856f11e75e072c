package attach

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// result is what Run returned.
type result struct {
	code int
	err  error
}

// runAsync runs Run over conn in the background.
func runAsync(conn io.ReadWriteCloser, in io.Reader, out io.Writer) <-chan result {
	ch := make(chan result, 1)
	go func() {
		code, err := Run(conn, in, out)
		ch <- result{code, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Run still runs after 10s")
		return result{}
	}
}

// lockedBuffer is an output the test reads while Run writes it.
type lockedBuffer struct {
	ch chan []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.ch <- append([]byte(nil), p...)
	return len(p), nil
}

// TestRunCarriesASession: with input that is no terminal, Run first
// tells the default 24x80 size, sends the input as data and its end as
// an end-of-input frame, writes the job's output and returns the
// exit status the far end sends.
func TestRunCarriesASession(t *testing.T) {
	conn, far := socketPair(t)
	inR, inW := io.Pipe()
	t.Cleanup(func() { inW.Close() })
	out := &lockedBuffer{ch: make(chan []byte, 16)}
	res := runAsync(conn, inR, out)

	fr := NewReader(far)
	f, err := fr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if rows, cols, err := f.WindowSize(); err != nil || rows != 24 || cols != 80 {
		t.Fatalf("first frame: %q %dx%d %v; want the 24x80 window", f.Type, rows, cols, err)
	}
	if _, err := inW.Write([]byte("echo hi\n")); err != nil {
		t.Fatal(err)
	}
	if f, err := fr.Next(); err != nil || f.Type != Data || string(f.Payload) != "echo hi\n" {
		t.Fatalf("input: %q %q %v", f.Type, f.Payload, err)
	}
	inW.Close()
	if f, err := fr.Next(); err != nil || f.Type != Close {
		t.Fatalf("after the input's end: %q %v, want the end-of-input frame", f.Type, err)
	}

	if err := WriteData(far, []byte("hi\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-out.ch:
		if string(p) != "hi\r\n" {
			t.Fatalf("output %q", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job's output never reached Run's output")
	}
	// A frame type this end does not know is skipped, not fatal: a
	// newer far end may send more kinds.
	if err := WriteFrame(far, 'z', []byte("later")); err != nil {
		t.Fatal(err)
	}
	if err := WriteExit(far, 42); err != nil {
		t.Fatal(err)
	}
	if r := await(t, res); r.err != nil || r.code != 42 {
		t.Fatalf("Run: %d %v, want 42", r.code, r.err)
	}
	// Run closed its end.
	if _, err := fr.Next(); err != io.EOF {
		t.Errorf("far end after the exit: %v, want io.EOF", err)
	}
}

// TestRunFailures: a refusal from the far end comes back as its
// reason, a stream cut before the exit status or a malformed frame as
// an error saying so, and a failing output as that failure.
func TestRunFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		far  func(io.Writer) // what the far end sends before closing
		out  io.Writer
		want func(error) bool
		text string
	}{
		{
			name: "refused",
			far:  func(w io.Writer) { _ = WriteError(w, "job 12 is not interactive") },
			want: func(err error) bool {
				var re *RemoteError
				return errors.As(err, &re) && re.Msg == "job 12 is not interactive"
			},
			text: "job 12 is not interactive",
		},
		{
			name: "cut",
			far:  func(w io.Writer) { _ = WriteData(w, []byte("partial")) },
			want: func(err error) bool { return err != nil },
			text: "attach stream closed before the command ended",
		},
		{
			name: "cut inside a frame",
			far:  func(w io.Writer) { _, _ = w.Write([]byte{Exit, 0, 0, 0, 4, 0}) },
			want: func(err error) bool { return err != nil },
			text: "attach stream closed before the command ended",
		},
		{
			name: "malformed",
			far: func(w io.Writer) {
				var hdr [5]byte
				hdr[0] = Data
				binary.BigEndian.PutUint32(hdr[1:], 1<<31)
				_, _ = w.Write(hdr[:])
			},
			want: func(err error) bool { return errors.Is(err, ErrBadFrame) },
			text: "attach stream: attach: malformed frame",
		},
		{
			name: "output fails",
			far:  func(w io.Writer) { _ = WriteData(w, []byte("x")) },
			out:  failingWriter{},
			want: func(err error) bool { return errors.Is(err, syscall.EPIPE) },
			text: "broken pipe",
		},
		{
			name: "bad exit frame",
			far:  func(w io.Writer) { _ = WriteFrame(w, Exit, []byte{1}) },
			want: func(err error) bool { return errors.Is(err, ErrBadFrame) },
			text: "exit status",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, far := socketPair(t)
			out := tc.out
			if out == nil {
				out = io.Discard
			}
			res := runAsync(conn, strings.NewReader(""), out)
			tc.far(far)
			far.CloseWrite()
			r := await(t, res)
			if !tc.want(r.err) || !strings.Contains(r.err.Error(), tc.text) {
				t.Fatalf("Run: %d %v; want an error with %q", r.code, r.err, tc.text)
			}
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }

// TestRunOnATerminal: with a terminal as input, Run tells the
// terminal's own size, tells it again when the window changes
// (SIGWINCH), passes keys through raw (no line editing: each key goes
// at once) and detaches, leaving the job running, at DetachKey: the
// keys typed before it are still sent, the stream is closed and the
// terminal is given back in the mode it had.
func TestRunOnATerminal(t *testing.T) {
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Skipf("SKIP: no pseudo-terminal here to test Run's terminal handling: %v", err)
	}
	defer ptm.Close()
	defer tty.Close()
	if err := pty.Setsize(tty, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}

	conn, far := socketPair(t)
	res := runAsync(conn, tty, io.Discard)
	fr := NewReader(far)
	window := func(what string, wantRows, wantCols uint16) {
		t.Helper()
		f, err := fr.Next()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if rows, cols, err := f.WindowSize(); err != nil || rows != wantRows || cols != wantCols {
			t.Fatalf("%s: %q frame %dx%d %v, want %dx%d", what, f.Type, rows, cols, err, wantRows, wantCols)
		}
	}
	window("first frame", 40, 120)

	// Raw mode: a key with no newline after it reaches the far end.
	if _, err := ptm.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	if f, err := fr.Next(); err != nil || f.Type != Data || string(f.Payload) != "q" {
		t.Fatalf("a key typed: %q %q %v (a terminal not in raw mode waits for the line)", f.Type, f.Payload, err)
	}

	if err := pty.Setsize(tty, &pty.Winsize{Rows: 50, Cols: 160}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	window("after SIGWINCH", 50, 160)

	if _, err := ptm.Write([]byte{'a', 'b', DetachKey, 'c'}); err != nil {
		t.Fatal(err)
	}
	if f, err := fr.Next(); err != nil || f.Type != Data || string(f.Payload) != "ab" {
		t.Fatalf("keys before the detach key: %q %q %v, want \"ab\"", f.Type, f.Payload, err)
	}
	if r := await(t, res); !errors.Is(r.err, ErrDetached) {
		t.Fatalf("Run after the detach key: %d %v, want ErrDetached", r.code, r.err)
	}
	if f, err := fr.Next(); err != io.EOF {
		t.Errorf("far end after the detach: %q %v, want io.EOF (no end of input, no more keys)", f.Type, err)
	}
	after, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if *after != *before {
		t.Errorf("the terminal's mode was not given back after Run")
	}
}
