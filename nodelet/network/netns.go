package network

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// newNetNS creates a network namespace and pins it by bind-mounting it
// on path (created), as `ip netns add` does under /run/netns.
func newNetNS(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("netns pin: %w", err)
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		// A thread that cannot get back to the nodelet's namespace stays
		// locked, so the runtime discards it with this goroutine.
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		merr := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, "")
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(merr, fmt.Errorf("back to the nodelet's netns: %w", err))
			return
		}
		runtime.UnlockOSThread()
		if merr != nil {
			merr = fmt.Errorf("pinning netns: %w", merr)
		}
		errc <- merr
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}

// removeNetNS unpins the namespace at path and removes the file; the
// namespace itself goes when its last process does. A missing path is
// no error.
func removeNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unpinning netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// tuneNeighbours makes ARP retry every 100 ms instead of every second
// on the named links of namespace ns: a container that dials a peer
// whose container is not up yet, or whose first ARP request went out
// before its bridge port forwarded, would otherwise wait a second (the
// MPI launch at session start does exactly that). Per link: a namespace
// other than the first has no neigh/default. Best effort: the default
// still works.
func tuneNeighbours(ns netns.NsHandle, links ...string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked: the thread, in the container's namespace, goes
		// with the goroutine.
		runtime.LockOSThread()
		if netns.Set(ns) != nil {
			return
		}
		for _, l := range links {
			_ = os.WriteFile("/proc/sys/net/ipv4/neigh/"+l+"/retrans_time_ms", []byte("100"), 0o644)
		}
	}()
	<-done
}
