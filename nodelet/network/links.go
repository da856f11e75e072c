package network

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/api"
)

// oneQueue gives a veth's ends (the peer takes its end's) one transmit
// and one receive queue. Without them the kernel makes a veth end with
// a queue per possible CPU, with its sysfs entries, and then, still
// holding the RTNL lock every other link change on the node waits for,
// cuts the queues in use to one and waits for an RCU grace period
// (veth_init_queues): with many containers starting at once, every one
// of them queues behind it. One queue is what a veth uses anyway.
func oneQueue(la netlink.LinkAttrs) netlink.LinkAttrs {
	la.NumTxQueues, la.NumRxQueues = 1, 1
	return la
}

// addLink adds l; a link of the same name that is still there (a
// container's that the reaper has not deleted yet, or a crash's) is
// deleted first and the add tried again. Looking for it before every
// add would cost every container a request under the kernel's RTNL lock.
func addLink(l netlink.Link) error {
	err := netlink.LinkAdd(l)
	if errors.Is(err, unix.EEXIST) {
		if derr := deleteLinks(l.Attrs().Name); derr != nil {
			return errors.Join(err, derr)
		}
		err = netlink.LinkAdd(l)
	}
	return err
}

// setDownIn sets link name in namespace ns down; a missing one is no
// error.
func setDownIn(ns netns.NsHandle, name string) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in container netns: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return nil
	}
	if err := h.LinkSetDown(l); err != nil && !isNotFound(err) {
		return fmt.Errorf("%s down: %w", name, err)
	}
	return nil
}

// linkList lists the links of the calling thread's namespace. A dump
// the kernel interrupted because links changed meanwhile (as they do
// while namespaces unpinned a moment ago die in the background,
// deleting their veths' peers here) is taken again, a few times.
func linkList() ([]netlink.Link, error) {
	for try := 0; ; try++ {
		links, err := netlink.LinkList()
		if !errors.Is(err, netlink.ErrDumpInterrupted) || try == 4 {
			return links, err
		}
	}
}

// deleteLinks deletes the named links; missing ones are no error.
func deleteLinks(names ...string) error {
	var errs []error
	for _, n := range names {
		if n == "" {
			continue
		}
		l, err := netlink.LinkByName(n)
		if err != nil {
			if !isNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		if err := netlink.LinkDel(l); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT)
}

func container(job api.AssignedJob, host string) (api.Container, bool) {
	for _, c := range job.Containers {
		if c.Host == host {
			return c, true
		}
	}
	return api.Container{}, false
}
