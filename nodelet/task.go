package nodelet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/session"
)

// startTimeout bounds preparing and starting one container.
const startTimeout = 2 * time.Minute

// killWait is how long a container may take to die after SIGKILL before
// Destroy is tried anyway.
const killWait = 5 * time.Second

// task supervises one container from preparing to destroyed.
type task struct {
	key      key
	job      api.AssignedJob
	stop     chan struct{} // closed by requestStop
	stopOnce sync.Once
	// adopted is the container a previous nodelet started, re-attached
	// to: the task skips preparing and starting.
	adopted runtime.Container
	// mpsHeld: the task counts in the MPS daemon's users (a fraction
	// of a GPU); it releases it once its container is destroyed.
	mpsHeld bool
	// terminal is the container, once it started, when its runtime
	// serves terminals (bsub -I); nil otherwise.
	terminal atomic.Pointer[runtime.Terminal]
	// signalled is the highest signal request Seq of the job this task
	// has queued or skipped (a.mu); sigs queues them for supervise.
	signalled uint64
	sigs      signalQueue
	// frozen: the task froze its container (frozenSet: frozen is what
	// the container is); frozenCores are the cores it gave back to the
	// node's pool while frozen (suspend.go; the task's goroutine only).
	frozen, frozenSet bool
	frozenCores       []int
	// rec is the container's record as last written (the task's
	// goroutine only); nil until written.
	rec *record
	// cid is the container ID a re-attached container was started
	// with (its record's); "" for a new one (see id).
	cid string
	// outputs are the job's output and error files, held open to
	// watch their size against the partition's max_output (the task's
	// goroutine only).
	outputs []watchedOutput
	// reach is the container's routed default address, reported with
	// its start ("": none, or NAT only; the task's goroutine only).
	reach string
	// steps times the container's start (the task's goroutine only).
	steps *stepClock
	// ended: the container's final state is reported (its exit, or its
	// failure to start); the task may still be tearing it down.
	ended atomic.Bool
	// startedAt is when its container started here (a.mu; zero: a
	// re-attached one, or not started yet).
	startedAt time.Time
}

// releaseMPS drops the task's hold on the MPS daemon.
func (a *launcher) releaseMPS(t *task) {
	if t.mpsHeld {
		t.mpsHeld = false
		a.mps.release()
	}
}

func (t *task) requestStop() { t.stopOnce.Do(func() { close(t.stop) }) }

// startTask registers and launches the task for k. a.mu is held.
func (a *launcher) startTask(ctx context.Context, k key, job api.AssignedJob) {
	a.startTaskWith(ctx, k, job, nil, false, nil)
}

// startTaskWith is startTask, for a re-attached container when c is not
// nil (holding the MPS daemon when mpsHeld), with its record rec. a.mu
// is held.
func (a *launcher) startTaskWith(ctx context.Context, k key, job api.AssignedJob, c runtime.Container, mpsHeld bool, rec *record) {
	t := &task{key: k, job: job, stop: make(chan struct{}), adopted: c, mpsHeld: mpsHeld,
		signalled: lastSignal(job), sigs: newSignalQueue(), rec: rec}
	if rec != nil {
		t.signalled, t.cid = rec.Signalled, rec.ID
	} else {
		t.queueStopAtStart()
	}
	a.running[k] = t
	a.tasks.Add(1)
	go func() {
		defer a.tasks.Done()
		a.runTask(ctx, t)
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.running, k)
		if detaching(ctx) && a.canDetach() {
			return
		}
		if w, ok := a.recon.assignedJob(k); !ok || w.SessionID == t.job.SessionID || t.job.SessionID == "" {
			a.finished[k] = true // else another job under its id waits to start
		}
		if ctx.Err() == nil {
			a.recon.reconcileLocked(ctx) // a later run may have waited for this one
		}
	}()
}

func (a *launcher) report(t *task, state api.ContainerState, code int, msg string) {
	u := api.ContainerUpdate{JobID: t.key.job, Host: t.key.host, Requeues: t.key.run, State: state, ExitCode: code, Message: msg}
	if state.Ended() {
		u.At = time.Now()
	}
	a.reports.send(&t.job, u)
}

// runTask: preparing → running → exited | killed | failed, then destroy.
func (a *launcher) runTask(ctx context.Context, t *task) {
	c := t.adopted
	var starting time.Duration // 0 for an adopted container: its start was not timed here
	if c == nil {
		a.report(t, api.ContainerPreparing, 0, "")
		began := time.Now()
		t.steps = newStepClock()
		var err error
		c, err = a.startContainer(ctx, t)
		if err != nil {
			t.ended.Store(true)
			a.report(t, api.ContainerFailed, 0, err.Error())
			a.metrics.failed(failStart)
			a.detach(t)
			a.specs.removeFiles(t)
			a.releaseMPS(t)
			a.cpus.release(t.id())
			return
		}
		starting = time.Since(began)
		a.log.Debug("container started", "id", c.ID(), "took", starting, t.steps.group())
		a.metrics.starts.Inc()
	}
	if tc, ok := c.(runtime.Terminal); ok {
		t.terminal.Store(&tc)
	}
	a.metrics.running.Inc()
	defer a.metrics.running.Dec()
	running := api.ContainerUpdate{JobID: t.key.job, Host: t.key.host, Requeues: t.key.run, State: api.ContainerRunning, Starting: starting, Reach: t.reach}
	if t.adopted == nil {
		running.At = time.Now() // started here, now (an adopted one earlier: unknown)
		a.mu.Lock()
		t.startedAt = running.At
		a.mu.Unlock()
	}
	a.reports.send(&t.job, running)
	state, exit, msg := a.supervise(ctx, t, c)
	use := c.Usage()
	if state == "" {
		a.log.Info("leaving container running", "id", c.ID())
		return // detaching: the next nodelet re-attaches to it
	}
	if exit.OOM && state == api.ContainerExited {
		state, msg = api.ContainerOOM, oomMessage(t)
	}
	switch {
	case state == api.ContainerOOM:
		a.metrics.failed(failOOM)
	case state == api.ContainerExited && exit.Code != 0:
		a.metrics.failed(failExit)
	}
	state, msg = a.reg.fenceMessage(state, msg)
	// Its end as measured here goes with the report, however late that
	// reaches schedd (and, in the record, to a restarted nodelet).
	at := exit.At
	if at.IsZero() {
		at = time.Now()
	}
	u := api.ContainerUpdate{JobID: t.key.job, Host: t.key.host, Requeues: t.key.run, State: state,
		ExitCode: exit.Code, Message: msg, CPUTime: use.CPU, MemPeak: use.MemPeak, At: at}
	a.mu.Lock()
	u.Started = t.startedAt // kept with its end: a restore may learn of the run from it alone
	a.mu.Unlock()
	// The slot is free when the process is gone: the exit is reported
	// first and the container torn down after, off the slot's path (see
	// holdsUntilDestroyed for what must go before the report).
	destroyed := false
	if holdsUntilDestroyed(t) {
		a.destroy(ctx, c)
		destroyed = true
	}
	a.cpus.release(t.id()) // its cores are free with its process
	a.recovery.markTearingDown(t, u)
	t.ended.Store(true)
	a.reports.send(&t.job, u)
	if !destroyed {
		a.destroy(ctx, c)
	}
	a.detach(t)
	a.specs.removeFiles(t)
	a.recovery.removeRecord(t)
	a.releaseMPS(t)
}

// holdsUntilDestroyed tells whether t's container holds something until
// it is destroyed that schedd would give to the next container at once:
// GPU devices. Once the main process has exited its memory and CPUs are
// free (the pid namespace's other processes died with it), and what
// teardown still holds clashes with nothing a new container gets: its
// network names and addresses are its own (allocated per container id,
// or per session for a session network, and a requeued run of the same
// container waits for the earlier run's task, teardown included), its
// cgroup, bundle and files are named by its id. GPU devices are
// different: a process the kernel has not finished reaping, or the
// driver's cleanup of its contexts, would still hold device memory the
// next job is promised, and the MPS daemon counts its users. So a
// container with GPUs is destroyed before its exit is reported; the
// rest of its teardown (network, files, record) still comes after.
func holdsUntilDestroyed(t *task) bool {
	c, err := session.Container(t.job, t.key.host)
	return err == nil && len(c.GPUs) > 0
}

// destroy destroys c, logging a failure (recovery removes what is left).
func (a *launcher) destroy(ctx context.Context, c runtime.Container) {
	if err := c.Destroy(context.WithoutCancel(ctx)); err != nil {
		a.log.Error("destroying container", "id", c.ID(), "err", err)
	}
}

// supervise waits for the container to exit, or for a stop request or
// shutdown; it returns the state to report, "" when the nodelet detaches
// and leaves the container running.
func (a *launcher) supervise(ctx context.Context, t *task, c runtime.Container) (api.ContainerState, runtime.Exit, string) {
	exited := make(chan runtime.Exit, 1)
	go func() {
		e, _ := c.Wait(context.Background())
		exited <- e
	}()
	a.watchOutputs(t)
	defer t.closeOutputs()
	watch := time.NewTicker(outputCheckEvery)
	defer watch.Stop()
	for {
		select {
		case e := <-exited:
			return api.ContainerExited, e, ""
		case <-t.sigs.kick:
			a.deliverSignals(t, c)
			a.applyFreeze(t, c)
		case <-watch.C:
			if msg := a.outputOverLimit(t); msg != "" {
				return a.killForOutput(t, c, exited, msg)
			}
		case <-t.stop:
			a.deliverSignals(t, c) // signals asked with the stop (a victim's warning) go first
			return a.stopContainer(t, c, exited, "stopped: job ended or was killed", a.stopGrace(t.key.job))
		case <-ctx.Done():
			if detaching(ctx) && a.canDetach() {
				return "", runtime.Exit{}, ""
			}
			return a.stopContainer(t, c, exited, "stopped: nodelet shutting down", a.cfg.StopGrace)
		}
	}
}

// stopContainer sends SIGTERM, waits grace, then SIGKILL. A container
// that had exited by itself before the stop is reported exited. A
// frozen container (its job suspended) is thawed after the SIGTERM,
// which its processes then get first.
func (a *launcher) stopContainer(t *task, c runtime.Container, exited <-chan runtime.Exit, msg string, grace time.Duration) (api.ContainerState, runtime.Exit, string) {
	select {
	case e := <-exited:
		return api.ContainerExited, e, ""
	default:
	}
	if err := c.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, runtime.ErrNotRunning) {
		a.log.Warn("SIGTERM failed", "id", c.ID(), "err", err)
	}
	a.thawToStop(t, c)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case e := <-exited:
		return api.ContainerKilled, e, msg
	case <-timer.C:
	}
	a.log.Info("grace period over, sending SIGKILL", "id", c.ID(), "grace", grace)
	_ = c.Signal(syscall.SIGKILL)
	select {
	case e := <-exited:
		return api.ContainerKilled, e, msg + " (SIGKILL after grace)"
	case <-time.After(killWait):
		return api.ContainerKilled, runtime.Exit{Code: 128 + int(syscall.SIGKILL)}, msg + " (SIGKILL after grace)"
	}
}

// startContainer builds the spec and starts it; a stop requested
// meanwhile is honoured by supervise right after.
func (a *launcher) startContainer(ctx context.Context, t *task) (runtime.Container, error) {
	spec, out, err := a.specs.buildSpec(t)
	if err != nil {
		return nil, err
	}
	if a.net != nil {
		ep, err := a.net.Attach(t.job, t.key.host, spec.ID, a.egress(t.key.job))
		if err != nil {
			out.Close()
			return nil, err
		}
		spec.NetNS = ep.NetNS
		if a.net.Routed() {
			t.reach = ep.Default
		}
		t.steps.mark("network")
	}
	defer out.Close() // the runtime holds its own copy
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	c, err := a.rt.Start(sctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start: %w", out.named(err))
	}
	t.steps.mark("runtime")
	t.outputs = watchOutputs(out) // measured against max_output while it runs
	if err := a.recovery.writeRecord(t, spec); err != nil {
		a.log.Warn("container record not written: a restarted nodelet will not re-attach to it", "id", spec.ID, "err", err)
	}
	t.steps.mark("record")
	return c, nil
}

// egress tells whether job's partition lets its containers out on the
// default network (its assignment's NoEgress unset). a.mu is taken.
func (a *launcher) egress(job uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, asg := range a.last.Assignments {
		if asg.Job.ID == job {
			return !asg.NoEgress
		}
	}
	return true
}

// detach takes the container off its session network, once its
// processes are gone.
func (a *launcher) detach(t *task) {
	if a.net == nil {
		return
	}
	if err := a.net.Detach(t.job, t.key.host, t.id()); err != nil {
		a.log.Warn("removing container network", "id", t.id(), "err", err)
	}
}

// oomMessage explains an OOM kill with the container's limit.
func oomMessage(t *task) string {
	c, err := session.Container(t.job, t.key.host)
	if err != nil || c.Resources.Memory <= 0 {
		return "out of memory"
	}
	return fmt.Sprintf("out of memory (limit %dMiB)", c.Resources.Memory>>20)
}

// stopGrace is how long job's containers have between SIGTERM and
// SIGKILL: its assignment's StopGrace (a preempted job's partition
// grace_time), else the nodelet's StopGrace. a.mu is taken.
func (a *launcher) stopGrace(job uint64) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, asg := range a.last.Assignments {
		if asg.Job.ID == job && asg.StopGrace > 0 {
			return asg.StopGrace
		}
	}
	return a.cfg.StopGrace
}
