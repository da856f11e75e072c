package nodelet

import (
	"log/slog"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/gpu"
)

// mpsName is the NVIDIA MPS control binary, looked up on $PATH.
const mpsName = "nvidia-cuda-mps-control"

// mpsDaemon runs the node's MPS control daemon while containers holding
// a fraction of a GPU run, where nvidia-cuda-mps-control exists: started
// with the first such container, asked to quit after the last. Its pipe
// and log directories are under StateDir/mps.
type mpsDaemon struct {
	dir string
	log *slog.Logger

	mu    sync.Mutex
	users int
	m     gpu.MPS // zero while not running, or without the binary
}

// fractional tells whether shares hold part of a device (MPS limits).
func fractional(shares []api.GPUShare) bool {
	for _, s := range shares {
		if s.Share < 1 {
			return true
		}
	}
	return false
}

// acquire counts one more fractional container, starting the daemon for
// the first; it returns the pipe directory, "" without MPS.
func (d *mpsDaemon) acquire() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.users++
	if d.m.Pipe == "" {
		m, err := gpu.StartMPS(d.dir)
		if err != nil {
			d.log.Warn("MPS control daemon not started: fractional GPUs are not isolated", "err", err)
		} else if m.Pipe != "" {
			d.log.Info("MPS control daemon started", "pipe", m.Pipe)
		}
		d.m = m
	}
	return d.m.Pipe
}

// adopt counts a re-attached fractional container: the daemon a
// previous nodelet started still runs, with the same pipe directory.
func (d *mpsDaemon) adopt() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.users++
	if d.m.Pipe == "" {
		if _, err := exec.LookPath(mpsName); err == nil {
			d.m = gpu.MPS{Pipe: filepath.Join(d.dir, "pipe")}
		}
	}
}

// release counts one fractional container less, stopping the daemon
// after the last.
func (d *mpsDaemon) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.users--; d.users > 0 {
		return
	}
	d.users = 0
	if d.m.Pipe == "" {
		return
	}
	if err := d.m.Stop(); err != nil {
		d.log.Warn("stopping the MPS control daemon", "err", err)
	} else {
		d.log.Info("MPS control daemon stopped")
	}
	d.m = gpu.MPS{}
}
