package nodelet

import (
	"errors"
	"sync"
	"syscall"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// Signal requests (bkill -s) reach a nodelet in its assignments, as the
// job's Signals. Each container delivers each request once: the task
// remembers the highest Seq it has handled, and its record keeps it, so
// that neither a restarted nodelet nor a new schedd leader (whose
// assignments carry the same list) sends one again. The record is
// written before the signal is sent: a crash in between loses that one
// signal rather than sending it twice.

// signalQueue hands signal requests from reconcile to the task's
// supervise loop.
type signalQueue struct {
	mu   sync.Mutex
	reqs []api.SignalRequest
	// frozen is whether the container is to be frozen (its job
	// suspended), once known (suspend.go).
	known, frozen bool
	kick          chan struct{} // one pending wake-up
}

func newSignalQueue() signalQueue { return signalQueue{kick: make(chan struct{}, 1)} }

// lastSignal is the Seq of the job's last signal request (0: none).
func lastSignal(j api.AssignedJob) uint64 {
	if n := len(j.Signals); n > 0 {
		return j.Signals[n-1].Seq
	}
	return 0
}

// stopAtStart is job's last STOP or CONT request for host's container
// when it is a STOP: a job suspended (bstop) after it was placed but
// before this container started, or one stopped before a requeue, has
// the container stopped as soon as it starts, so that it is stopped as
// bjobs says (USUSP) until a CONT.
func stopAtStart(job api.AssignedJob, host string) (api.SignalRequest, bool) {
	for i := len(job.Signals) - 1; i >= 0; i-- {
		s := job.Signals[i]
		if s.Host != "" && s.Host != host {
			continue
		}
		switch syscall.Signal(s.Signal) {
		case syscall.SIGSTOP:
			return s, true
		case syscall.SIGCONT:
			return api.SignalRequest{}, false
		}
	}
	return api.SignalRequest{}, false
}

// queueStopAtStart queues the STOP a new task's container must get as
// soon as it starts (see stopAtStart); the requests before it are
// skipped, as for any task (they were for earlier runs, or were refused
// before the job started).
func (t *task) queueStopAtStart() {
	s, ok := stopAtStart(t.job, t.key.host)
	if !ok {
		return
	}
	t.sigs.mu.Lock()
	t.sigs.reqs = append(t.sigs.reqs, s)
	t.sigs.mu.Unlock()
	select {
	case t.sigs.kick <- struct{}{}:
	default:
	}
}

// queueSignals queues job's signal requests for this container that it
// has not handled yet. a.mu is held.
func (t *task) queueSignals(job api.AssignedJob) {
	var add []api.SignalRequest
	for _, s := range job.Signals {
		if s.Seq <= t.signalled {
			continue
		}
		t.signalled = s.Seq
		if s.Host == "" || s.Host == t.key.host {
			add = append(add, s)
		}
	}
	if len(add) == 0 {
		return
	}
	t.sigs.mu.Lock()
	t.sigs.reqs = append(t.sigs.reqs, add...)
	t.sigs.mu.Unlock()
	select {
	case t.sigs.kick <- struct{}{}:
	default:
	}
}

// deliverSignals sends the queued signals to c, recording each as
// handled first (the task's goroutine).
func (a *launcher) deliverSignals(t *task, c runtime.Container) {
	t.sigs.mu.Lock()
	reqs := t.sigs.reqs
	t.sigs.reqs = nil
	t.sigs.mu.Unlock()
	for _, s := range reqs {
		if t.rec != nil && s.Seq > t.rec.Signalled {
			t.rec.Signalled = s.Seq
			if err := a.recovery.saveRecord(*t.rec); err != nil {
				a.log.Warn("container record not updated: a restarted nodelet may signal again", "id", c.ID(), "err", err)
			}
		}
		err := c.Signal(syscall.Signal(s.Signal))
		switch {
		case err == nil:
			a.log.Info("signal delivered", "id", c.ID(), "job", t.key.job, "host", t.key.host, "signal", api.SignalName(s.Signal), "seq", s.Seq)
		case errors.Is(err, runtime.ErrNotRunning):
		default:
			a.log.Warn("signal not delivered", "id", c.ID(), "signal", api.SignalName(s.Signal), "err", err)
		}
	}
}
