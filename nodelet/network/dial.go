package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrNoNamespace: the container has no namespace pinned here (not
// started yet, or gone).
var ErrNoNamespace = errors.New("no network namespace")

// DialLoopback connects to TCP port on the loopback of container id's
// network namespace: the one Attach made and pinned in the nodelet's own
// directory, which no container can reach or change. The socket is made
// on a thread moved into that namespace, so it can reach nothing the
// container could not (not the node's loopback, not the node's other
// networks); the thread returns to the nodelet's namespace before it
// runs anything else, or is discarded when it cannot.
func (m *Manager) DialLoopback(ctx context.Context, id string, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d is not a TCP port", port)
	}
	pin := m.pinOf(id)
	ns, err := os.OpenFile(pin, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("container %s: %w", id, ErrNoNamespace)
	}
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(ns.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Type != unix.NSFS_MAGIC {
		// Attach pins a namespace there; anything else is not ours.
		return nil, fmt.Errorf("container %s: %w (%s is not a pinned namespace)", id, ErrNoNamespace, pin)
	}
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("entering container %s's netns: %w", id, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr != nil {
			// Never unlocked: the thread goes with the goroutine.
			if c != nil {
				c.Close()
			}
			done <- result{err: fmt.Errorf("back to the nodelet's netns: %w", serr)}
			return
		}
		runtime.UnlockOSThread()
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}
