package runc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// container is one `runc run` and its bundle.
type container struct {
	rt  *Runtime
	id  string
	l   layout
	cmd *exec.Cmd

	done chan struct{} // closed when runc run has exited; exit is set
	exit runtime.Exit

	oom    atomic.Bool   // runc events reported an OOM kill
	events chan struct{} // closed when runc events has ended; nil if never started

	mu        sync.Mutex // serialises Destroy
	destroyed bool
}

var _ runtime.Container = (*container)(nil)

func (c *container) ID() string { return c.id }

// watch reaps runc run; its status is the container's.
func (c *container) watch() {
	err := c.cmd.Wait()
	exit := exitOf(c.cmd.ProcessState, err)
	if c.events != nil && exit.Code != 0 {
		select { // the OOM event may trail the exit a little
		case <-c.events:
		case <-time.After(500 * time.Millisecond):
		}
	}
	exit.OOM = c.oom.Load() && exit.Code != 0
	c.exit = exit
	close(c.done)
}

func exitOf(ps *os.ProcessState, err error) runtime.Exit {
	if ps == nil {
		return runtime.Exit{Code: 255}
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return runtime.Exit{Code: 128 + int(ws.Signal()), Signal: ws.Signal()}
	}
	e := runtime.Exit{Code: ps.ExitCode()}
	if e.Code > 128 && e.Code < 128+65 {
		e.Signal = syscall.Signal(e.Code - 128) // runc reports 128+n
	}
	_ = err
	return e
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

// Signal implements runtime.Container with `runc kill`.
func (c *container) Signal(sig syscall.Signal) error {
	select {
	case <-c.done:
		return fmt.Errorf("container %s: %w", c.id, runtime.ErrNotRunning)
	default:
	}
	out, err := c.rt.runc(context.Background(), "kill", c.id, fmt.Sprint(int(sig)))
	if err != nil {
		select {
		case <-c.done:
			return fmt.Errorf("container %s: %w", c.id, runtime.ErrNotRunning)
		default:
		}
		return fmt.Errorf("runc kill %s: %w: %s", c.id, err, out)
	}
	return nil
}

// Destroy implements runtime.Container: runc delete --force, wait for
// runc run, make sure the cgroups are gone, remove Spec.Dir.
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
	if err := os.RemoveAll(c.l.dir); err != nil {
		errs = append(errs, err)
	}
	c.destroyed = len(errs) == 0
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

// watchEvents (when c.events was made) follows `runc events` for OOM notifications until the
// container is gone.
func (c *container) watchEvents() {
	cmd := exec.Command(c.rt.binary, "--root", c.rt.root, "events", "--interval", "1h", c.id)
	out, err := cmd.StdoutPipe()
	if err != nil || cmd.Start() != nil {
		close(c.events)
		return
	}
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev struct{ Type string }
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "oom" {
				c.oom.Store(true)
			}
		}
		_ = cmd.Wait()
	}()
}
