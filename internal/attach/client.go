package attach

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/term"
)

// DetachKey (Ctrl-]) typed at a terminal leaves the session running and
// returns ErrDetached, as telnet's escape does.
const DetachKey = 0x1d

// ErrDetached: the user typed DetachKey; the job goes on.
var ErrDetached = errors.New("detached")

// RemoteError is the reason the far end gave for not serving a terminal.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return e.Msg }

// Run carries a terminal over conn: in (put in raw mode when it is a
// terminal's *os.File, with its size sent now and on every SIGWINCH) to the job's
// terminal, the job's output to out. It returns the command's exit
// status once it ends, ErrDetached when the user types DetachKey, a
// *RemoteError when the far end refused, or the stream's failure.
func Run(conn io.ReadWriteCloser, in io.Reader, out io.Writer) (int, error) {
	defer conn.Close()
	w := &lockedWriter{w: conn}
	fd, tty := -1, false
	if f, ok := in.(*os.File); ok {
		fd = int(f.Fd())
		tty = term.IsTerminal(fd)
	}
	rows, cols := uint16(24), uint16(80)
	if tty {
		if c, r, err := term.GetSize(fd); err == nil && r > 0 && c > 0 {
			rows, cols = uint16(r), uint16(c)
		}
		old, err := term.MakeRaw(fd)
		if err != nil {
			return 0, fmt.Errorf("terminal: %w", err)
		}
		defer func() { _ = term.Restore(fd, old) }()
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if c, r, err := term.GetSize(fd); err == nil {
					_ = w.window(uint16(r), uint16(c))
				}
			}
		}()
	}
	// A failed write shows below as the stream's end, after any error
	// frame the far end sent before it closed.
	_ = w.window(rows, cols)
	detached := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := in.Read(buf)
			p := buf[:n]
			if tty {
				if i := bytes.IndexByte(p, DetachKey); i >= 0 {
					_ = w.data(p[:i])
					close(detached)
					conn.Close()
					return
				}
			}
			if len(p) > 0 && w.data(p) != nil {
				return
			}
			if err != nil {
				_ = w.frame(Close, nil)
				return
			}
		}
	}()
	fr := NewReader(conn)
	for {
		f, err := fr.Next()
		if err != nil {
			select {
			case <-detached:
				return 0, ErrDetached
			default:
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return 0, errors.New("attach stream closed before the command ended")
			}
			return 0, fmt.Errorf("attach stream: %w", err)
		}
		switch f.Type {
		case Data:
			if _, err := out.Write(f.Payload); err != nil {
				return 0, err
			}
		case Exit:
			return f.ExitCode()
		case Error:
			return 0, &RemoteError{Msg: string(f.Payload)}
		}
	}
}

// lockedWriter serialises frames from the input and resize goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) frame(typ byte, p []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return WriteFrame(l.w, typ, p)
}

func (l *lockedWriter) data(p []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return WriteData(l.w, p)
}

func (l *lockedWriter) window(rows, cols uint16) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return WriteWindow(l.w, rows, cols)
}
