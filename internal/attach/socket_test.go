package attach

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// listen does what troupe-init does with the descriptor Bind made.
func listen(t *testing.T, f *os.File) net.Listener {
	t.Helper()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	ln, err := ListenFD(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestBindListenDial: the nodelet binds the socket (0600, a stale file
// replaced), nobody can connect before init listens, and once it does
// DialPeer reaches it when the listener is the named process and
// refuses when it is another, before sending anything.
func TestBindListenDial(t *testing.T) {
	path := filepath.Join(t.TempDir(), SocketName)
	if err := os.WriteFile(path, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Bind(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&fs.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Errorf("bound socket mode %v, want a socket 0600", st.Mode())
	}
	if _, err := DialPeer(path, 0); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dialing before init listens: %v, want ECONNREFUSED", err)
	}

	ln := listen(t, f)
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	c, err := DialPeer(path, os.Getpid())
	if err != nil {
		t.Fatalf("dialing the socket this process listens on: %v", err)
	}
	defer c.Close()
	srv := <-accepted
	defer srv.Close()
	if err := WriteExit(srv, 0); err != nil {
		t.Fatal(err)
	}
	if f, err := NewReader(c).Next(); err != nil || f.Type != Exit {
		t.Fatalf("a frame over the dialled socket: %q %v", f.Type, err)
	}

	other := 1
	if os.Getpid() == 1 {
		other = 2
	}
	_, err = DialPeer(path, other)
	if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "not the container's init") {
		t.Errorf("dialing a socket another process than pid %d serves: %v, want ErrUntrusted", other, err)
	}
}

// TestDialPeerRefusesImpostors: a name that is a symlink, not a socket,
// behind a symlinked directory, missing, or a socket owned by another
// user is refused with an error naming the path.
func TestDialPeerRefusesImpostors(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.sock")
	f, err := Bind(real)
	if err != nil {
		t.Fatal(err)
	}
	listen(t, f)

	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain.sock")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	linkDir := filepath.Join(t.TempDir(), "dir")
	if err := os.Symlink(dir, linkDir); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       error
	}{
		{"symlink", link, ErrUntrusted},
		{"regular file", plain, ErrUntrusted},
		{"symlinked directory", filepath.Join(linkDir, "real.sock"), syscall.ENOTDIR},
		{"missing", filepath.Join(dir, "none.sock"), fs.ErrNotExist},
	} {
		c, err := DialPeer(tc.path, 0)
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.path) && !strings.Contains(err.Error(), filepath.Dir(tc.path)) {
			t.Errorf("%s: %v, want %v naming %s", tc.name, err, tc.want, tc.path)
		}
	}

	if os.Geteuid() != 0 {
		t.Log("not root: a socket owned by another user cannot be made here; that case is not checked")
		return
	}
	if err := os.Lchown(real, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := DialPeer(real, 0); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("a socket owned by uid 65534: %v, want ErrUntrusted", err)
	}
}

// TestLongSocketPath: a path longer than a unix socket address holds
// is bound and dialled all the same (through the directory's
// descriptor).
func TestLongSocketPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, SocketName)
	if len(path) <= maxSocketPath {
		t.Fatalf("path of %d bytes is not long", len(path))
	}
	f, err := Bind(path)
	if err != nil {
		t.Fatalf("binding a %d-byte path: %v", len(path), err)
	}
	listen(t, f)
	c, err := DialPeer(path, os.Getpid())
	if err != nil {
		t.Fatalf("dialing a %d-byte path: %v", len(path), err)
	}
	c.Close()
}

// TestListenFDNotASocket: a descriptor that is not a socket is refused
// with its number.
func TestListenFDNotASocket(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if ln, err := ListenFD(int(r.Fd())); err == nil || !strings.Contains(err.Error(), "not a socket") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("ListenFD on a pipe: %v, want not a socket", err)
	}
}
