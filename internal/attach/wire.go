// Package attach is the stream behind `bsub -I` and `battach`: a terminal
// on a job's main1, carried client ⇄ schedd ⇄ nodelet ⇄ troupe-init.
//
// schedd and the nodelet only splice bytes; the two ends speak frames:
// one type byte, a big-endian uint32 payload length, the payload.
//
//	'd' data         both ways: keystrokes in, terminal output out
//	'w' window size  client → init: rows, cols (uint16 each)
//	'c' end of input client → init: stdin closed (the terminal gets ^D)
//	'x' exit         init → client: the command's exit status (int32)
//	'e' error        → client: why there is no terminal (one line)
//
// troupe-init serves the pseudo-terminal (Server) on a unix socket the
// nodelet made (Bind) in a root-owned directory no container sees, handed
// to troupe-init as an inherited descriptor (ListenFD); the nodelet
// connects with DialPeer, which follows no symlink and checks that the
// listener is the container's init. Run is the client's end.
//
// It imports no troupe package: client, schedd, nodelet and troupe-init
// all import it.
package attach

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Upgrade is the HTTP Upgrade token of an attach stream.
const Upgrade = "troupe-attach"

// SocketName is the file name of the attach socket the nodelet binds in
// its private directory of the container.
const SocketName = "attach.sock"

// Frame types.
const (
	Data   byte = 'd'
	Window byte = 'w'
	Close  byte = 'c'
	Exit   byte = 'x'
	Error  byte = 'e'
)

// MaxPayload bounds one frame; larger writes are split.
const MaxPayload = 32 << 10

// Frame is one message of the stream.
type Frame struct {
	Type    byte
	Payload []byte
}

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("attach: frame of %d bytes exceeds %d", len(payload), MaxPayload)
	}
	buf := make([]byte, 5+len(payload))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(payload)))
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

// WriteData writes p as data frames of at most MaxPayload bytes.
func WriteData(w io.Writer, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), MaxPayload)
		if err := WriteFrame(w, Data, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// WriteWindow tells the terminal's size.
func WriteWindow(w io.Writer, rows, cols uint16) error {
	var b [4]byte
	binary.BigEndian.PutUint16(b[0:2], rows)
	binary.BigEndian.PutUint16(b[2:4], cols)
	return WriteFrame(w, Window, b[:])
}

// WriteExit sends the command's exit status.
func WriteExit(w io.Writer, code int) error {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(int32(code)))
	return WriteFrame(w, Exit, b[:])
}

// WriteError sends why there is no terminal.
func WriteError(w io.Writer, msg string) error {
	if len(msg) > MaxPayload {
		msg = msg[:MaxPayload]
	}
	return WriteFrame(w, Error, []byte(msg))
}

// ErrBadFrame is a frame that does not parse.
var ErrBadFrame = errors.New("attach: malformed frame")

// Reader reads frames.
type Reader struct{ r *bufio.Reader }

// NewReader reads frames from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Next reads the next frame; io.EOF at a clean end of stream.
func (fr *Reader) Next() (Frame, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(fr.r, hdr[:1]); err != nil {
		return Frame{}, err
	}
	if _, err := io.ReadFull(fr.r, hdr[1:]); err != nil {
		return Frame{}, io.ErrUnexpectedEOF
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: %d-byte payload", ErrBadFrame, n)
	}
	f := Frame{Type: hdr[0], Payload: make([]byte, n)}
	if _, err := io.ReadFull(fr.r, f.Payload); err != nil {
		return Frame{}, io.ErrUnexpectedEOF
	}
	return f, nil
}

// WindowSize decodes a Window frame.
func (f Frame) WindowSize() (rows, cols uint16, err error) {
	if f.Type != Window || len(f.Payload) != 4 {
		return 0, 0, fmt.Errorf("%w: window size", ErrBadFrame)
	}
	return binary.BigEndian.Uint16(f.Payload[0:2]), binary.BigEndian.Uint16(f.Payload[2:4]), nil
}

// ExitCode decodes an Exit frame.
func (f Frame) ExitCode() (int, error) {
	if f.Type != Exit || len(f.Payload) != 4 {
		return 0, fmt.Errorf("%w: exit status", ErrBadFrame)
	}
	return int(int32(binary.BigEndian.Uint32(f.Payload))), nil
}

// Splice copies a ⇄ b until either direction ends, then closes both:
// schedd and the nodelet join the stream's hops with it.
func Splice(a, b io.ReadWriteCloser) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	<-done
	a.Close()
	b.Close()
	<-done
}
