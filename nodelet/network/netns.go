package network

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

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
		// Every link made in or moved to the namespace from now on has
		// IPv6 off (its loopback, already there, keeps ::1).
		noIPv6("default")
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

// noIPv6 turns IPv6 off on link name of the calling thread's namespace
// ("default": on every link made there later), before the link goes up:
// troupe's networks are IPv4. A link with IPv6 on gets a link-local
// address when it goes up, and the kernel's IPv6 autoconfiguration and
// multicast listener reports run for it; and when the address goes,
// with the link, every MASQUERADE rule of the node (the default
// network's is one) has the kernel walk its whole connection-tracking
// table in the background, looking for connections of that address
// (nf_nat_masquerade: on a node with 262,144 buckets, a millisecond or
// more of CPU a container). Best effort: a kernel without IPv6
// has no such file, and nothing to turn off.
func noIPv6(name string) {
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0o644)
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
	tuneLinks(ns, "", links...)
}

// tuneLinks is tuneNeighbours, and with groOff != "" it also turns GRO
// off on that link (see plug), on the same thread; it returns that
// error, if any.
func tuneLinks(ns netns.NsHandle, groOff string, links ...string) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, in the container's namespace, goes
		// with the goroutine.
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		for _, l := range links {
			_ = os.WriteFile("/proc/sys/net/ipv4/neigh/"+l+"/retrans_time_ms", []byte("100"), 0o644)
		}
		var err error
		if groOff != "" {
			err = setOffload(groOff, ethtoolSGRO, false)
		}
		errc <- err
	}()
	return <-errc
}

// Legacy ethtool commands (linux/ethtool.h), which every kernel keeps:
// get and set one offload, the way `ethtool -K` does without the
// ethtool binary.
const (
	ethtoolGGRO = 0x2b
	ethtoolSGRO = 0x2c
)

// setOffload sets one offload of link name, in the calling thread's
// namespace, with the legacy ethtool set command cmd.
func setOffload(name string, cmd uint32, on bool) error {
	v := uint32(0)
	if on {
		v = 1
	}
	_, err := ethtool(name, cmd, v)
	return err
}

// ethtool issues the legacy ethtool command cmd with value v (struct
// ethtool_value) for link name in the calling thread's namespace, and
// returns the value the kernel left there.
func ethtool(name string, cmd, v uint32) (uint32, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	val := &struct{ cmd, data uint32 }{cmd: cmd, data: v}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte // the rest of struct ifreq
	}
	copy(ifr.name[:unix.IFNAMSIZ-1], name)
	ifr.data = uintptr(unsafe.Pointer(val))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(val)
	if errno != 0 {
		return 0, fmt.Errorf("ethtool command %#x on %s: %w", cmd, name, errno)
	}
	return val.data, nil
}
