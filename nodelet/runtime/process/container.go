package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/internal/backoff"
	"github.com/troupe-hpc/troupe/internal/procfs"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// container is one process group.
type container struct {
	id   string
	dir  string
	cmd  *exec.Cmd
	pgid int

	done  chan struct{} // closed once the leader is reaped; exit and usage set
	exit  runtime.Exit
	usage runtime.Usage

	mu        sync.Mutex
	destroyed bool
}

func (c *container) ID() string { return c.id }

// DialTerminal implements runtime.Terminal: the socket the nodelet bound
// in the container's private directory, served by troupe-init, the
// group's leader.
func (c *container) DialTerminal() (net.Conn, error) {
	return attach.DialPeer(attachSock(c.dir), c.pgid)
}

// attachSock is where a Spec.TTY container's attach socket is bound: in
// dir/private, root's (the nodelet's user's) and 0700, which the
// command, running as the job's user, cannot reach.
func attachSock(dir string) string { return filepath.Join(dir, "private", attach.SocketName) }

func (c *container) watch() {
	_ = c.cmd.Wait()
	ws, _ := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		c.usage = runtime.Usage{
			CPU:     time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
			MemPeak: ru.Maxrss << 10, // KiB
		}
	}
	if ws.Signaled() {
		c.exit = runtime.Exit{Code: 128 + int(ws.Signal()), Signal: ws.Signal()}
	} else {
		c.exit = runtime.Exit{Code: ws.ExitStatus()}
	}
	c.exit.At = time.Now()
	close(c.done)
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

// Usage implements runtime.Container: the leader's rusage (with the
// children it waited for), once it has exited; zero before.
func (c *container) Usage() runtime.Usage {
	select {
	case <-c.done:
		return c.usage
	default:
		return runtime.Usage{}
	}
}

// Signal implements runtime.Container: the whole group gets sig.
func (c *container) Signal(sig syscall.Signal) error {
	select {
	case <-c.done:
		return fmt.Errorf("container %s: %w", c.id, runtime.ErrNotRunning)
	default:
	}
	if err := syscall.Kill(-c.pgid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("container %s: %w", c.id, runtime.ErrNotRunning)
		}
		return fmt.Errorf("signal %s: %w", c.id, err)
	}
	return nil
}

// Destroy implements runtime.Container: SIGKILL to the group, reap the
// leader, remove Spec.Dir.
func (c *container) Destroy(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil
	}
	_ = syscall.Kill(-c.pgid, syscall.SIGKILL)
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	// Members outliving the leader keep the group alive: kill again and
	// wait until none runs (zombies awaiting their new parent's reaping
	// hold nothing).
	for procfs.GroupAlive(c.pgid) {
		_ = syscall.Kill(-c.pgid, syscall.SIGKILL)
		if err := backoff.Sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return err
	}
	c.destroyed = true
	return nil
}

// lookPath resolves a bare command name against the container's PATH,
// not the nodelet's.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, kv := range env {
		if dirs, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range filepath.SplitList(dirs) {
				p := filepath.Join(d, name)
				if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
					return p, nil
				}
			}
			break
		}
	}
	return exec.LookPath(name)
}

// Pid is the pid of the container's leader (the command's first process).
func (c *container) Pid() int { return c.pgid }
