package attach

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxSocketPath is what fits in sockaddr_un's sun_path with its NUL.
const maxSocketPath = 107

// listenBacklog is the accept queue troupe-init gives the socket.
const listenBacklog = 16

// ErrUntrusted means the attach socket is not the one the nodelet made:
// not a socket, a symlink, owned by someone else, or served by another
// process than the container's init. Nothing was sent to it.
var ErrUntrusted = errors.New("attach socket not trusted")

// Bind makes the attach socket at path: a unix stream socket bound
// there but not listening, returned as a file to hand to troupe-init
// (an inherited descriptor, see ListenFD). The caller (the nodelet) makes
// it in a directory of its own that no container can see or change; a
// stale file at path is replaced.
func Bind(path string) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("attach socket %s: %w", path, err)
	}
	_ = os.Remove(path)
	err = viaShortPath(path, func(p string) error {
		return unix.Bind(fd, &unix.SockaddrUnix{Name: p})
	})
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("attach socket %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// ListenFD listens on the bound socket troupe-init inherited as
// descriptor fd (see Bind). The descriptor is closed on exec from then
// on, so the command never inherits it; the peer credentials clients
// see are the caller's, which is how DialPeer recognises troupe-init.
func ListenFD(fd int) (net.Listener, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("attach descriptor %d: not a socket", fd)
	}
	unix.CloseOnExec(fd)
	if err := unix.Listen(fd, listenBacklog); err != nil {
		return nil, fmt.Errorf("attach descriptor %d: listen: %w", fd, err)
	}
	f := os.NewFile(uintptr(fd), "attach")
	defer f.Close() // FileListener holds its own duplicate
	return net.FileListener(f)
}

// DialPeer connects to the attach socket at path the way the root
// nodelet must: the directory is opened without following a symlink,
// the name must be a socket (not a symlink) owned by this process's
// user, and, when pid > 0, the listening end must have been set up by
// process pid (SO_PEERCRED: the container's init on the host). Anything
// else is ErrUntrusted, and the connection is closed before a byte is
// sent. A socket that does not exist yet wraps fs.ErrNotExist; one
// nobody listens on yet wraps syscall.ECONNREFUSED.
func DialPeer(path string, pid int) (net.Conn, error) {
	dirfd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("attach socket %s: %w", path, &os.PathError{Op: "open", Path: filepath.Dir(path), Err: err})
	}
	defer unix.Close(dirfd)
	name := filepath.Base(path)
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, fmt.Errorf("attach socket %s: %w", path, &os.PathError{Op: "lstat", Path: path, Err: err})
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("%w: %s is not a socket (mode %o)", ErrUntrusted, path, st.Mode)
	}
	if int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%w: %s is owned by uid %d, not %d", ErrUntrusted, path, st.Uid, os.Geteuid())
	}
	short := fmt.Sprintf("/proc/self/fd/%d/%s", dirfd, name)
	if len(short) > maxSocketPath {
		return nil, fmt.Errorf("unix socket %s: name too long", path)
	}
	c, err := net.Dial("unix", short)
	if err != nil {
		return nil, fmt.Errorf("attach socket %s: %w", path, err)
	}
	if pid > 0 {
		if err := checkPeer(c.(*net.UnixConn), pid); err != nil {
			c.Close()
			return nil, fmt.Errorf("%w: %s: %v", ErrUntrusted, path, err)
		}
	}
	return c, nil
}

// checkPeer requires the listening end of c to be process pid's.
func checkPeer(c *net.UnixConn, pid int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if int(cred.Pid) != pid {
		return fmt.Errorf("served by pid %d, not the container's init %d", cred.Pid, pid)
	}
	return nil
}

func viaShortPath(path string, do func(string) error) error {
	if len(path) <= maxSocketPath {
		return do(path)
	}
	dir, err := os.OpenFile(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer dir.Close()
	short := fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path))
	if len(short) > maxSocketPath {
		return fmt.Errorf("unix socket %s: name too long", path)
	}
	return do(short)
}
