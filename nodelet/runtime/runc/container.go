package runc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// container is one detached runc container and its bundle. Its init
// process is not the nodelet's child (runc run -d), so a restarted
// nodelet watches it the same way: a pidfd on the init pid, and the exit
// status troupe-init writes to layout.exitFile (through the descriptor
// it inherited: it never sees the path).
type container struct {
	rt  *Runtime
	id  string
	l   layout
	pid int // init's pid on the host; 0: it had exited when found

	done  chan struct{} // closed when init has exited; exit and usage are set
	exit  runtime.Exit
	usage runtime.Usage // read from the cgroups as init exited

	mu        sync.Mutex // serialises Destroy
	destroyed bool
}

// DialTerminal implements runtime.Terminal: the socket the nodelet
// bound in the container's private directory, served by its init.
func (c *container) DialTerminal() (net.Conn, error) {
	return attach.DialPeer(c.l.attachSock(), c.pid)
}

var _ runtime.Container = (*container)(nil)

// killTimeout bounds Signal(SIGKILL)'s wait for every task to be gone.
const killTimeout = 30 * time.Second

func (c *container) ID() string { return c.id }

// watch waits for init (pid) to exit through a pidfd and sets the exit
// from troupe-init's exit file. pid 0 means it has already exited.
func (c *container) watch(pidfd int) {
	if pidfd >= 0 {
		for {
			fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, -1)
			if err == unix.EINTR {
				continue
			}
			if err != nil || n > 0 {
				break
			}
		}
		_ = unix.Close(pidfd)
	}
	c.exited(pidfd >= 0)
}

// exited sets the exit (troupe-init's exit file, the OOM verdict) and
// the usage once init has exited, and closes done. live says init was
// watched as it exited: without a time in the exit file, now is its
// end; otherwise (it ended unwatched, init killed) the end is unknown.
func (c *container) exited(live bool) {
	exit := readExit(c.l.exitFile())
	if exit.At.IsZero() && live {
		exit.At = time.Now()
	}
	// The kernel counts an OOM kill before its victim dies: the count
	// is in the cgroup by the time init has exited.
	exit.OOM = oomKilled(c.id) && exit.Code != 0
	c.exit = exit
	c.usage = readUsage(cgroupBase, c.id)
	close(c.done)
}

// maxExitFile caps what is read of the exit file: a decimal status and
// a newline.
const maxExitFile = 16

// readExit turns troupe-init's exit file into an Exit. The file is in
// root's private directory; it is still opened without following a
// symlink or blocking on a FIFO, must be a regular file and is read up
// to maxExitFile bytes. No status in it means init itself was killed, by
// SIGKILL (runc kill, delete --force, the OOM killer) as nothing else
// ends it without it writing the status. The file's modification time
// is when troupe-init wrote the status, as its command ended: the
// exit's At, even when no nodelet watched the container end.
func readExit(path string) runtime.Exit {
	killed := runtime.Exit{Code: 128 + int(syscall.SIGKILL), Signal: syscall.SIGKILL}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return killed
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return killed
	}
	b, _ := io.ReadAll(io.LimitReader(f, maxExitFile))
	if len(b) == 0 {
		return killed
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return runtime.Exit{Code: 255}
	}
	e := runtime.Exit{Code: code}
	if fi, err := f.Stat(); err == nil {
		e.At = fi.ModTime()
	}
	if code > 128 && code < 128+65 {
		e.Signal = syscall.Signal(code - 128)
	}
	return e
}

// oomKilled reads the container's memory cgroup's OOM-kill counter (v1
// memory.oom_control, v2 memory.events), before runc deletes it.
func oomKilled(id string) bool {
	const base = "/sys/fs/cgroup"
	for _, f := range []string{
		filepath.Join(base, "memory", "troupe", id, "memory.oom_control"),
		filepath.Join(base, "troupe", id, "memory.events"),
	} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if n, ok := strings.CutPrefix(line, "oom_kill "); ok && strings.TrimSpace(n) != "0" {
				return true
			}
		}
	}
	return false
}

// Wait implements runtime.Container.
func (c *container) Wait(ctx context.Context) (runtime.Exit, error) {
	select {
	case <-c.done:
		return c.exit, nil
	case <-ctx.Done():
		return runtime.Exit{}, ctx.Err()
	}
}

// Signal implements runtime.Container with `runc kill` (to troupe-init,
// which forwards it; STOP and CONT with --all).
func (c *container) Signal(sig syscall.Signal) error {
	select {
	case <-c.done:
		return fmt.Errorf("container %s: %w", c.id, runtime.ErrNotRunning)
	default:
	}
	args := []string{"kill", c.id, fmt.Sprint(int(sig))}
	if sig == syscall.SIGKILL {
		// Every task at once, however hard it forks or however
		// throttled its cgroup: the init goes with them.
		ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
		defer cancel()
		if err := killAll(ctx, cgroupBase, c.id); err != nil {
			return fmt.Errorf("container %s: %w", c.id, err)
		}
		return nil
	}
	if sig == syscall.SIGSTOP || sig == syscall.SIGCONT {
		// troupe-init cannot forward what it cannot catch: every
		// process of the container stops (or goes on) together.
		args = []string{"kill", "--all", c.id, fmt.Sprint(int(sig))}
	}
	if c.rt.lib {
		var err error
		if sig == syscall.SIGSTOP || sig == syscall.SIGCONT {
			err = signalAll(c.id, sig)
		} else {
			err = c.rt.libctSignal(c.id, sig)
		}
		if err != nil {
			select {
			case <-c.done:
				return fmt.Errorf("container %s: %w", c.id, runtime.ErrNotRunning)
			default:
			}
		}
		return err
	}
	out, err := c.rt.runc(context.Background(), args...)
	if err != nil {
		select {
		case <-c.done:
			return fmt.Errorf("container %s: %w", c.id, runtime.ErrNotRunning)
		default:
		}
		if bytes.Contains(out, []byte("not running")) {
			return fmt.Errorf("container %s: %w", c.id, runtime.ErrNotRunning)
		}
		return fmt.Errorf("runc kill %s: %w: %s", c.id, err, out)
	}
	return nil
}

// Destroy implements runtime.Container: runc delete --force, wait for
// init to be gone, make sure the cgroups are gone, remove Spec.Dir.
func (c *container) Destroy(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil
	}
	var errs []error
	if err := c.rt.delete(ctx, c.id); err != nil {
		errs = append(errs, err)
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return errors.Join(append(errs, ctx.Err())...)
	}
	if err := removeCgroups(c.id); err != nil {
		errs = append(errs, err)
	}
	if err := unmountOverlay(c.rt.rootMount(c.id)); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(c.l.dir); err != nil {
		errs = append(errs, err)
	}
	c.destroyed = len(errs) == 0
	if c.destroyed {
		c.rt.forget(c.id)
	}
	return errors.Join(errs...)
}

// CgroupPaths lists the cgroup directories container id would have on
// this node, v1 hierarchies and v2 alike, existing or not.
func CgroupPaths(id string) []string {
	const base = "/sys/fs/cgroup"
	if _, err := os.Stat(filepath.Join(base, "cgroup.controllers")); err == nil {
		return []string{filepath.Join(base, "troupe", id)}
	}
	ents, _ := os.ReadDir(base)
	var paths []string
	for _, e := range ents {
		if e.IsDir() {
			paths = append(paths, filepath.Join(base, e.Name(), "troupe", id))
		}
	}
	return paths
}

// removeCgroups removes what runc left of id's cgroups (it normally
// leaves nothing). An empty cgroup is removed with rmdir.
func removeCgroups(id string) error {
	var errs []error
	for _, p := range CgroupPaths(id) {
		if err := syscall.Rmdir(p); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// state is what `runc state` says of a container.
type state struct {
	Status string `json:"status"`
	Pid    int    `json:"pid"`
}

// state asks runc about id; errors wrap runtime.ErrNotFound when runc
// does not know it.
func (r *Runtime) state(ctx context.Context, id string) (state, error) {
	cmd := exec.CommandContext(ctx, r.binary, "--root", r.root, "state", id)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if notExist(stderr.Bytes()) {
			return state{}, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
		}
		return state{}, fmt.Errorf("runc state %s: %w: %s", id, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var st state
	if err := json.Unmarshal(out, &st); err != nil {
		return state{}, fmt.Errorf("runc state %s: %w", id, err)
	}
	return st, nil
}

// attach makes the container value for id, whose init is pid (0: it has
// exited), and starts watching it: with reap when the init is this
// process's child (the in-process mode's), which returns once it has
// exited and been reaped, else through a pidfd.
func (r *Runtime) attach(id string, l layout, pid int, reap func()) *container {
	c := &container{rt: r, id: id, l: l, pid: pid, done: make(chan struct{})}
	if reap != nil {
		r.remember(id)
		go func() {
			reap()
			c.exited(true)
		}()
		return c
	}
	pidfd := -1
	if pid > 0 {
		fd, err := unix.PidfdOpen(pid, 0)
		if err == nil {
			pidfd = fd
		}
		// ESRCH: it has already exited (and was reaped).
	}
	r.remember(id)
	go c.watch(pidfd)
	return c
}
