package client

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
)

// ErrBadSnapshotFile marks a snapshot file that RestoreSnapshot found
// damaged while it sent it: a header that is not a snapshot file's, a
// section whose length or sha256 is not its header's, or bytes after
// its end. The upload is cut there, so schedd restores nothing.
var ErrBadSnapshotFile = errors.New("snapshot file damaged")

// The snapshot file's headers (badmin(8), FILES): the file's, then, for
// a troupe-snapshot/2 file, the accounting section's, each followed by
// as many bytes as it says, whose sha256 it carries.
const (
	snapFileMagic        = "troupe-snapshot/1"
	snapFileMagicHistory = "troupe-snapshot/2"
	snapFileAccounting   = "troupe-accounting/1"
	// snapFileHeaderMax bounds a header line.
	snapFileHeaderMax = 4 << 10
)

// snapshotChecker passes a snapshot file through as it is read, a
// buffer at a time, and checks it as schedd does: each section's length
// and sha256 against its header, and nothing after the last. A damage
// ends the read with ErrBadSnapshotFile instead of the rest of the file.
type snapshotChecker struct {
	r *bufio.Reader
	// The section being read: left of its n bytes, its sum, what it is
	// (for messages), and the header to expect after it ("": the end).
	left  int64
	sum   hash.Hash
	want  []byte
	what  string
	next  string
	begun bool
	done  bool
	// pending is a header line read but not yet handed out.
	pending []byte
}

func newSnapshotChecker(r io.Reader) *snapshotChecker {
	return &snapshotChecker{r: bufio.NewReaderSize(r, 1<<16)}
}

func (c *snapshotChecker) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	if !c.begun {
		c.begun = true
		if err := c.header("file", ""); err != nil {
			return 0, err
		}
		return c.Read(p)
	}
	if c.left == 0 && !c.done {
		if !bytes.Equal(c.sum.Sum(nil), c.want) {
			return 0, fmt.Errorf("%w: checksum mismatch: the %s is damaged", ErrBadSnapshotFile, c.what)
		}
		if c.next == "" {
			c.done = true
		} else {
			if err := c.header("accounting section", c.next); err != nil {
				return 0, err
			}
			return c.Read(p)
		}
	}
	if c.done {
		if _, err := c.r.ReadByte(); err != io.EOF {
			return 0, fmt.Errorf("%w: bytes after its end (padded, or two files joined)", ErrBadSnapshotFile)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.sum.Write(p[:n])
	c.left -= int64(n)
	if err == io.EOF {
		if c.left > 0 {
			return n, fmt.Errorf("%w: the %s's header says %d bytes more than the file holds (truncated)", ErrBadSnapshotFile, c.what, c.left)
		}
		err = nil
	}
	return n, err
}

// header reads the header line of the next section: the file's (magic
// "" takes either snapshot version) or the accounting section's.
func (c *snapshotChecker) header(what, magic string) error {
	line, err := c.r.ReadSlice('\n')
	if err != nil || len(line) > snapFileHeaderMax {
		return fmt.Errorf("%w: the %s's header line is missing or cut", ErrBadSnapshotFile, what)
	}
	f := strings.Fields(string(line))
	var size, sum string
	switch {
	case magic == "" && len(f) == 4 && (f[0] == snapFileMagic || f[0] == snapFileMagicHistory) &&
		strings.HasPrefix(f[1], "index=") && strings.HasPrefix(f[2], "bytes=") && strings.HasPrefix(f[3], "sha256="):
		size, sum = f[2], f[3]
		c.what = "state"
		if f[0] == snapFileMagicHistory {
			c.next = snapFileAccounting
		} else {
			c.next = ""
		}
	case magic != "" && len(f) == 4 && f[0] == magic && strings.HasPrefix(f[1], "rows=") &&
		strings.HasPrefix(f[2], "bytes=") && strings.HasPrefix(f[3], "sha256="):
		size, sum = f[2], f[3]
		c.what, c.next = what, ""
	default:
		return fmt.Errorf("%w: the %s's header is not a snapshot file's: %.80q", ErrBadSnapshotFile, what, strings.TrimSpace(string(line)))
	}
	n, err1 := strconv.ParseInt(strings.TrimPrefix(size, "bytes="), 10, 64)
	want, err2 := hex.DecodeString(strings.TrimPrefix(sum, "sha256="))
	if err1 != nil || err2 != nil || n < 0 || len(want) != sha256.Size {
		return fmt.Errorf("%w: the %s's header is malformed: %.80q", ErrBadSnapshotFile, what, strings.TrimSpace(string(line)))
	}
	c.left, c.want, c.sum = n, want, sha256.New()
	c.pending = bytes.Clone(line)
	return nil
}

// snapshotBody is RestoreSnapshot's request body: r read through a
// snapshotChecker, from its start again for each try (a redirect to the
// leader, a retry) when r can seek; a reader that cannot is sent once.
func snapshotBody(r io.Reader) func() (io.Reader, error) {
	sent := false
	return func() (io.Reader, error) {
		if s, ok := r.(io.Seeker); ok {
			if _, err := s.Seek(0, io.SeekStart); err != nil {
				return nil, fmt.Errorf("sending the snapshot file again: %w", err)
			}
		} else if sent {
			return nil, fmt.Errorf("%w: the snapshot was read from a stream, which cannot be sent again; restore from a file", errResend)
		}
		sent = true
		return newSnapshotChecker(r), nil
	}
}

// errResend marks a body that cannot be sent a second time.
var errResend = errors.New("request body not sent again")
