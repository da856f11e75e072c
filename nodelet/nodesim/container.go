package nodesim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// fenceMessage is what nodelet reports for a container its fence killed.
const fenceMessage = "killed by the node's fence: no answer from schedd within the lease (nodelet(8), FENCING)"

// container is one pretend container, from preparing to ended.
type container struct {
	key      key
	job      api.AssignedJob
	stop     chan struct{} // closed by requestStop
	stopOnce sync.Once
}

func (c *container) requestStop() { c.stopOnce.Do(func() { close(c.stop) }) }

// behaviour reads how long the job's containers run and their exit code
// from its environment (TROUPE_SIM_DURATION, TROUPE_SIM_EXIT); the
// duration defaults to the walltime in force, else def.
func behaviour(job api.AssignedJob, def time.Duration) (time.Duration, int, error) {
	d := def
	if job.Walltime > 0 {
		d = job.Walltime
	}
	if v, ok := job.Spec.Env[EnvDuration]; ok {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < 0 {
			return 0, 0, fmt.Errorf("simulated node: %s=%q in the job's env: want a duration such as 1s or 100ms", EnvDuration, v)
		}
	}
	code := 0
	if v, ok := job.Spec.Env[EnvExit]; ok {
		var err error
		if code, err = strconv.Atoi(v); err != nil || code < 0 || code > 255 {
			return 0, 0, fmt.Errorf("simulated node: %s=%q in the job's env: want an exit code from 0 to 255", EnvExit, v)
		}
	}
	return d, code, nil
}

// firstOutput writes at, in seconds since the epoch with microseconds,
// as the only line of host's output file of job (Config.FirstOutput):
// where the job's output pattern puts it, relative to its working
// directory.
func firstOutput(job api.AssignedJob, host string, at time.Time) error {
	p, err := job.Spec.OutputPath(job.OutputVars(host))
	if err != nil {
		return err
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(job.Cwd, p)
	}
	line := strconv.AppendFloat(nil, float64(at.UnixMicro())/1e6, 'f', 6, 64)
	return os.WriteFile(p, append(line, '\n'), 0o644)
}

// start registers and launches the container for k; n.mu is held.
func (n *node) start(ctx context.Context, k key, job api.AssignedJob) {
	c := &container{key: k, job: job, stop: make(chan struct{})}
	n.running[k] = c
	n.tasks.Add(1)
	go func() {
		defer n.tasks.Done()
		n.runContainer(ctx, c)
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.running, k)
		n.finished[k] = true
		n.reconcileLocked(ctx) // a later run may have waited for this one
	}()
}

// runContainer reports what nodelet's runTask reports, in its order:
// preparing, running, then exited (the pretend process ended), killed
// (stopped: its job ended, was killed, or the node is shutting down) or
// failed (it could not start, or the lease ran out and the fence killed
// it).
func (n *node) runContainer(ctx context.Context, c *container) {
	update := func(state api.ContainerState, code int, msg string) {
		n.rep.Add(api.ContainerUpdate{JobID: c.key.job, Host: c.key.host, Requeues: c.key.run, State: state, ExitCode: code, Message: msg})
	}
	update(api.ContainerPreparing, 0, "")
	preparing := time.Now()
	run, code, err := behaviour(c.job, n.sim.cfg.Duration)
	if err != nil {
		n.sim.failed.Add(1)
		update(api.ContainerFailed, 0, "start: "+err.Error())
		return
	}
	if p := n.sim.cfg.Prepare; p > 0 {
		t := time.NewTimer(p)
		select {
		case <-t.C:
		case <-c.stop:
			t.Stop()
			n.sim.killed.Add(1)
			update(api.ContainerKilled, 0, "stopped: job ended or was killed")
			return
		case <-ctx.Done():
			t.Stop()
			n.sim.killed.Add(1)
			update(api.ContainerKilled, 0, "stopped: nodelet shutting down")
			return
		}
	}
	n.sim.started.Add(1)
	if n.sim.cfg.FirstOutput {
		if err := firstOutput(c.job, c.key.host, time.Now()); err != nil {
			n.sim.log.Warn("simulated node: first output", "job", c.key.job, "host", c.key.host, "err", err)
		}
	}
	n.rep.Add(api.ContainerUpdate{JobID: c.key.job, Host: c.key.host, Requeues: c.key.run, State: api.ContainerRunning,
		Starting: time.Since(preparing)})
	began := time.Now()
	end := began.Add(run)
	for {
		// Wake at the end of the run or of the lease, whichever comes
		// first: a lease that ran out without renewal kills, as the
		// fence does; a renewed one is waited on again.
		wake := end
		lease := n.leaseEnd()
		if !lease.IsZero() && lease.Before(wake) {
			wake = lease
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-c.stop:
			t.Stop()
			n.sim.killed.Add(1)
			update(api.ContainerKilled, 128+15, "stopped: job ended or was killed")
			return
		case <-ctx.Done():
			t.Stop()
			n.sim.killed.Add(1)
			update(api.ContainerKilled, 128+15, "stopped: nodelet shutting down")
			return
		case <-t.C:
		}
		now := time.Now()
		if !now.Before(end) {
			n.sim.exited.Add(1)
			n.rep.Add(api.ContainerUpdate{JobID: c.key.job, Host: c.key.host, Requeues: c.key.run, State: api.ContainerExited,
				ExitCode: code, CPUTime: now.Sub(began)})
			return
		}
		if lease := n.leaseEnd(); !lease.IsZero() && !now.Before(lease) {
			n.sim.failed.Add(1)
			update(api.ContainerFailed, 128+9, fenceMessage)
			return
		}
	}
}
