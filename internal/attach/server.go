package attach

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// replaySize is how much recent output an attaching client is shown
// first, so that it sees the prompt printed before it came.
const replaySize = 16 << 10

// writeTimeout drops a client that stops reading rather than stall the
// terminal for everyone.
const writeTimeout = 5 * time.Second

// Server shares one pseudo-terminal among the clients attached to it:
// output goes to every client (and to the transcript), input from any
// client goes to the terminal. troupe-init runs it.
type Server struct {
	pty        *os.File  // the terminal's master side
	transcript io.Writer // the container's output file; nil: none

	mu       sync.Mutex
	clients  map[net.Conn]bool
	ring     []byte // the last replaySize bytes of output
	done     bool   // Finish was called
	code     int
	attached chan struct{} // closed when a first client sent its first frame
	once     sync.Once
}

// NewServer serves the terminal whose master side is pty; output is
// also copied to transcript when it is not nil.
func NewServer(pty *os.File, transcript io.Writer) *Server {
	return &Server{pty: pty, transcript: transcript, clients: map[net.Conn]bool{}, attached: make(chan struct{})}
}

// Attached is closed once a client has attached (and told its window
// size): the command may start.
func (s *Server) Attached() <-chan struct{} { return s.attached }

// Serve accepts clients on ln until it is closed.
func (s *Server) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go s.handle(c)
	}
}

func (s *Server) handle(c net.Conn) {
	s.mu.Lock()
	if len(s.ring) > 0 && s.send(c, Data, s.ring) != nil {
		s.mu.Unlock()
		c.Close()
		return
	}
	if s.done {
		_ = s.sendExit(c, s.code)
		s.mu.Unlock()
		c.Close()
		return
	}
	s.clients[c] = true
	s.mu.Unlock()
	defer s.drop(c)
	fr := NewReader(c)
	for {
		f, err := fr.Next()
		if err != nil {
			return
		}
		switch f.Type {
		case Data:
			if _, err := s.pty.Write(f.Payload); err != nil {
				return
			}
		case Window:
			if rows, cols, err := f.WindowSize(); err == nil && rows > 0 && cols > 0 {
				_ = unix.IoctlSetWinsize(int(s.pty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
			}
		case Close:
			// End of the client's input: the terminal's EOF character
			// ends a read on an empty line, as ^D typed would.
			_, _ = s.pty.Write([]byte{4})
		}
		s.once.Do(func() { close(s.attached) })
	}
}

func (s *Server) drop(c net.Conn) {
	s.mu.Lock()
	delete(s.clients, c)
	s.mu.Unlock()
	c.Close()
}

// send writes one frame to c. s.mu is held.
func (s *Server) send(c net.Conn, typ byte, p []byte) error {
	_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
	if typ == Data {
		return WriteData(c, p)
	}
	return WriteFrame(c, typ, p)
}

func (s *Server) sendExit(c net.Conn, code int) error {
	_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
	return WriteExit(c, code)
}

// Pump copies the terminal's output to the clients and the transcript
// until the terminal reports an error (EIO once no process holds its
// other side any more).
func (s *Server) Pump() {
	buf := make([]byte, MaxPayload)
	for {
		n, err := s.pty.Read(buf)
		if n > 0 {
			s.output(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (s *Server) output(p []byte) {
	if s.transcript != nil {
		_, _ = s.transcript.Write(p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring = append(s.ring, p...)
	if over := len(s.ring) - replaySize; over > 0 {
		s.ring = append(s.ring[:0], s.ring[over:]...)
	}
	for c := range s.clients {
		if s.send(c, Data, p) != nil {
			delete(s.clients, c)
			c.Close()
		}
	}
}

// Finish tells every client the command exited with code and closes
// them; a client attaching later gets the replay and the exit status.
func (s *Server) Finish(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done, s.code = true, code
	for c := range s.clients {
		_ = s.sendExit(c, code)
		// Half-close: the client reads the exit and closes its end.
		if uc, ok := c.(*net.UnixConn); ok {
			_ = uc.CloseWrite()
		} else {
			c.Close()
		}
		delete(s.clients, c)
	}
}
