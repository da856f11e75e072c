package attach

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxSocketPath is what fits in sockaddr_un's sun_path with its NUL.
const maxSocketPath = 107

// Dial connects to the unix socket at path, however long: a path that
// does not fit in a socket address is reached through its directory's
// descriptor (/proc/self/fd/N/NAME).
func Dial(path string) (net.Conn, error) {
	var c net.Conn
	err := viaShortPath(path, func(p string) (err error) {
		c, err = net.Dial("unix", p)
		return err
	})
	return c, err
}

// Listen listens on the unix socket at path, however long (see Dial).
func Listen(path string) (net.Listener, error) {
	var ln net.Listener
	err := viaShortPath(path, func(p string) (err error) {
		ln, err = net.Listen("unix", p)
		return err
	})
	return ln, err
}

func viaShortPath(path string, do func(string) error) error {
	if len(path) <= maxSocketPath {
		return do(path)
	}
	dir, err := os.OpenFile(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
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
