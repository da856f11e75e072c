package apptainer

import (
	"context"
	"syscall"

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

// Destroy implements runtime.Container.
func (c *container) Destroy(ctx context.Context) error {
	for range 100 {
		pids := procfs.Descendants(c.pid, 0)
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	return c.Container.Destroy(ctx)
}
