package asuser

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

func init() {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	if err := serve(); err != nil {
		fmt.Fprintf(os.Stderr, "troupe-asuser: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serve is the helper: read the request, become the user, answer each
// path on fd 3.
func serve() error {
	body, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		return err
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	if err := become(req.Cred); err != nil {
		return err
	}
	const sock = 3
	for _, r := range req.Reqs {
		fd, err := openOne(r)
		var a answer
		var errno syscall.Errno
		switch {
		case err == nil:
		case errors.As(err, &errno):
			a.Errno = int(errno)
		default:
			a.Err = err.Error()
		}
		msg, _ := json.Marshal(a)
		var rights []byte
		if fd >= 0 {
			rights = unix.UnixRights(fd)
		}
		err = unix.Sendmsg(sock, msg, rights, nil, 0)
		if fd >= 0 {
			unix.Close(fd)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// become drops root for c's credentials, every thread at once (Go's
// Setgroups, Setgid and Setuid apply to all threads).
func become(c Cred) error {
	if err := syscall.Setgroups(c.Groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(c.GID); err != nil {
		return fmt.Errorf("setgid: %w", err)
	}
	if err := syscall.Setuid(c.UID); err != nil {
		return fmt.Errorf("setuid: %w", err)
	}
	if os.Getuid() != c.UID || os.Geteuid() != c.UID || os.Getegid() != c.GID {
		return errors.New("credentials did not change")
	}
	return nil
}

// resolve: no symlink on any component, no magic link, no crossing into
// /proc's fd links.
const resolve = unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openOne answers one request with an fd (-1 with an error).
func openOne(r Request) (int, error) {
	switch r.Kind {
	case Output:
		return openOutput(r.Path)
	case Source:
		return openSource(r.Path)
	case Image:
		return openImage(r.Path)
	}
	return -1, fmt.Errorf("unknown request kind %q", r.Kind)
}

func openat2(path string, flags uint64, mode uint64) (int, error) {
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Mode: mode, Resolve: resolve})
		if err == unix.EINTR || err == unix.EAGAIN {
			continue // EAGAIN: a rename raced the lookup
		}
		return fd, err
	}
}

// openOutput: O_NONBLOCK so that a FIFO answers ENXIO instead of hanging;
// cleared again on the regular file it must be.
func openOutput(path string) (int, error) {
	fd, err := openat2(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, ErrNotRegular
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_WRONLY|unix.O_APPEND); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openSource opens O_PATH (search permission on every directory on the
// way, no open of a FIFO or device), then asks the kernel whether the user
// may read what it found, through the fd: no second lookup by name.
func openSource(path string) (int, error) {
	fd, err := openat2(path, unix.O_PATH, 0) // not O_NOFOLLOW: that would open a trailing symlink itself
	if err != nil {
		return -1, err
	}
	// access(2) checks the real uid: the user's, here.
	if err := unix.Access("/proc/self/fd/"+strconv.Itoa(fd), unix.R_OK); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openImage opens for reading; a directory must be the user's own (a
// rootfs runs as the container's /, so it is the user's to give).
func openImage(path string) (int, error) {
	fd, err := openat2(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		if uid := os.Getuid(); uid != 0 && int(st.Uid) != uid {
			unix.Close(fd)
			return -1, ErrNotOwner
		}
	default:
		unix.Close(fd)
		return -1, ErrNotRegular
	}
	return fd, nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// limitedBuffer keeps the first 4 KiB of the helper's stderr.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
