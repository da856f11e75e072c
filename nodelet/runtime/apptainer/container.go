package apptainer

import (
	"context"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/internal/procfs"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// container is a process-runtime container whose Destroy also kills
// every descendant of apptainer: troupe-init moves the command into a
// process group of its own, out of reach of a group kill, and apptainer's
// starter forks.
type container struct {
	runtime.Container
	pid int
}

// Destroy implements runtime.Container. It kills every descendant and
// looks again until none is left, or killGrace has passed: a killed
// process stays in the process table until the kernel has torn it down,
// which a loaded machine may take a while to do, and a child forked
// meanwhile shows up on the next look.
func (c *container) Destroy(ctx context.Context) error {
	tick := time.NewTicker(killPoll)
	defer tick.Stop()
	give := time.NewTimer(killGrace)
	defer give.Stop()
look:
	for {
		pids := procfs.Descendants(c.pid, 0)
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		select {
		case <-tick.C:
		case <-give.C:
			break look
		case <-ctx.Done():
			break look
		}
	}
	return c.Container.Destroy(ctx)
}

// killPoll is how often Destroy looks for descendants left; killGrace
// how long it keeps looking.
const (
	killPoll  = 5 * time.Millisecond
	killGrace = 5 * time.Second
)
