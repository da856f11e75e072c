package runc

import (
	"bytes"
	"context"
	"fmt"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

var _ runtime.Freezer = (*container)(nil)

// Freeze implements runtime.Freezer: `runc pause` (libcontainer's Pause
// in the in-process mode) sets the container's freezer cgroup FROZEN and
// waits until the kernel says every task is.
func (c *container) Freeze(ctx context.Context) error { return c.freezer(ctx, true) }

// Thaw implements runtime.Freezer: `runc resume` (libcontainer's
// Resume).
func (c *container) Thaw(ctx context.Context) error { return c.freezer(ctx, false) }

func (c *container) freezer(ctx context.Context, freeze bool) error {
	verb := "resume"
	if freeze {
		verb = "pause"
	}
	select {
	case <-c.done:
		return fmt.Errorf("container %s: %w", c.id, runtime.ErrNotRunning)
	default:
	}
	if cg := cgroupOf(cgroupBase, c.id); cg.freeze != "" && cg.isFrozen() == freeze {
		// Already so (a nodelet restarted since, or a repeat): runc
		// refuses to pause a paused container or resume a running one.
		return nil
	}
	var err error
	var out []byte
	if c.rt.lib {
		err = c.rt.libctFreeze(c.id, freeze)
	} else {
		out, err = c.rt.runc(ctx, verb, c.id)
	}
	if err == nil {
		return nil
	}
	select {
	case <-c.done:
		return fmt.Errorf("container %s: %w", c.id, runtime.ErrNotRunning)
	default:
	}
	if bytes.Contains(out, []byte("not running")) || bytes.Contains(out, []byte("stopped")) {
		return fmt.Errorf("container %s: %w", c.id, runtime.ErrNotRunning)
	}
	if len(out) > 0 {
		return fmt.Errorf("runc %s %s: %w: %s", verb, c.id, err, bytes.TrimSpace(out))
	}
	return fmt.Errorf("runc %s %s: %w", verb, c.id, err)
}
