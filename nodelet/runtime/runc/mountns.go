package runc

import (
	"fmt"
	goruntime "runtime"

	"golang.org/x/sys/unix"
)

// inOwnMounts runs fn on an OS thread of its own, in a private copy of
// the nodelet's mount namespace that is a slave of it (the node's mounts
// still reach it, nothing mounted in it reaches the node), and ends that
// thread with fn.
//
// Start mounts a container's image overlay and starts the container
// from there: the init, forked by this thread, makes the container's
// own mount namespace as a copy of this one, so the overlay is in the
// container's namespace and no other, and the nodelet's own mount table
// does not grow by one mount per running container. That matters to
// every later start: a new mount namespace copies the whole table of the
// one it is made from, the init unmounts the copy again after
// pivot_root, and every Go program's start (the init's, troupe-init's)
// reads /proc/self/mountinfo to find its cgroup, all under the kernel's
// one lock for mounts. With 800 more mounts in the table, a `runc run`
// of /bin/true took 37.6 ms of CPU instead of 23.3–24.2 on the
// development machine.
func inOwnMounts(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the Go runtime ends the thread with this
		// goroutine, so nothing else ever runs in this namespace.
		goruntime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- fmt.Errorf("a mount namespace to start the container from: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			errc <- fmt.Errorf("a mount namespace to start the container from: making it a slave: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
