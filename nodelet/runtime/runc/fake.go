package runc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// Fake is the OCI runtime name of the benchmark mode (NewFakeIn): the
// driver does everything it does for a container up to the OCI
// runtime's `run` (the bundle, the image overlay, config.json), then
// starts no process.
const Fake = "fake"

// FakeOCI is what OCI() says of the fake mode, so that the node's
// registration shows it plainly (bhosts -l).
const FakeOCI = "fake (benchmark aid: starts no container)"

// ErrFakeRecover: the fake mode's containers are no processes, so none
// outlives the nodelet that "started" it.
var ErrFakeRecover = errors.New("the fake OCI runtime's containers do not outlive their nodelet")

// NewFakeIn returns the runc driver in its benchmark mode, a stand-in
// for the OCI runtime that measures what troupe itself spends on a
// container's start: Start prepares everything as it does for runc
// (home, the private directory and exit file, the image's overlay root
// mounted, the job's mounts resolved, config.json written), then, where
// `runc run -d` would start the container, it writes the wall clock as
// the container's first output line (seconds since the epoch with
// microseconds and a newline, as busybox `ts %.s` prints it) to
// Spec.Stdout and reports the container started. Nothing runs: the
// container "runs" until a signal that would end a process that does
// not handle it (SIGTERM, SIGKILL, SIGINT, …) or Destroy, and exits
// with 128+signal; Usage is zero; it cannot be frozen, attached to or
// recovered. The nodelet accepts it only when its config file asks
// for it explicitly (nodelet.Config.BenchmarkFakeRuntime): a node with
// it runs no job.
func NewFakeIn(stateDir, runDir string) (*Runtime, error) {
	r, err := newRuntime(filepath.Join(runDir, Fake), stateDir, runDir)
	if err != nil {
		return nil, err
	}
	r.fake, r.oci = true, FakeOCI
	return r, nil
}

// startFake is Start's end in the fake mode, once the bundle is
// written: the first output line, and a container that waits for a
// signal.
func (r *Runtime) startFake(s runtime.Spec, l layout) (runtime.Container, error) {
	if s.Stdout != nil {
		line := strconv.AppendFloat(nil, float64(time.Now().UnixMicro())/1e6, 'f', 6, 64)
		if _, err := s.Stdout.Write(append(line, '\n')); err != nil {
			return nil, fmt.Errorf("fake oci runtime: container %s: first output: %w", s.ID, err)
		}
	}
	r.remember(s.ID)
	return &fakeContainer{rt: r, id: s.ID, l: l, done: make(chan struct{})}, nil
}

// fakeContainer is a container of the fake mode: no process, only the
// prepared bundle and a state that a signal ends.
type fakeContainer struct {
	rt *Runtime
	id string
	l  layout

	once      sync.Once
	done      chan struct{} // closed when it has "exited"; exit is set
	exit      runtime.Exit
	mu        sync.Mutex // serialises Destroy
	destroyed bool
}

var _ runtime.Container = (*fakeContainer)(nil)

func (c *fakeContainer) ID() string { return c.id }

// end "exits" the container as a process killed by sig would.
func (c *fakeContainer) end(sig syscall.Signal) {
	c.once.Do(func() {
		c.exit = runtime.Exit{Code: 128 + int(sig), Signal: sig, At: time.Now()}
		close(c.done)
	})
}

// Wait implements runtime.Container.
func (c *fakeContainer) Wait(ctx context.Context) (runtime.Exit, error) {
	select {
	case <-c.done:
		return c.exit, nil
	case <-ctx.Done():
		return runtime.Exit{}, ctx.Err()
	}
}

// Signal implements runtime.Container: a signal whose default action
// ends a process ends the container; the others (SIGSTOP, SIGCONT,
// SIGCHLD, SIGWINCH, SIGURG, 0) change nothing.
func (c *fakeContainer) Signal(sig syscall.Signal) error {
	select {
	case <-c.done:
		return fmt.Errorf("container %s: %w", c.id, runtime.ErrNotRunning)
	default:
	}
	switch sig {
	case 0, syscall.SIGSTOP, syscall.SIGCONT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
		syscall.SIGCHLD, syscall.SIGWINCH, syscall.SIGURG:
		return nil
	}
	c.end(sig)
	return nil
}

// Usage implements runtime.Container: nothing ran.
func (c *fakeContainer) Usage() runtime.Usage { return runtime.Usage{} }

// Destroy implements runtime.Container: the container ends (SIGKILL)
// if it has not, its overlay is unmounted and Spec.Dir removed, as the
// runc mode's Destroy does once runc has deleted the container.
func (c *fakeContainer) Destroy(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil
	}
	c.end(syscall.SIGKILL)
	var errs []error
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
