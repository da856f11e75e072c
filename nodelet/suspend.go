package nodelet

import (
	"context"
	"errors"
	"time"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// Gang suspension: schedd's assignments say of each job whether it is
// suspended (AssignedJob.Suspended), and every task of the job on every
// node freezes its container through the runtime's cgroup freezer
// (runtime.Freezer), or thaws it, as they say. It is a state, not an
// event: a nodelet that restarts, or answers from a new leader, bring
// each container to it again, and freezing a frozen container (or
// thawing a running one) does nothing. A frozen container's whole cores
// go back to the node's pool, for the job schedd gives them to; thawed,
// it takes them back.

// freezeTimeout bounds one freeze or thaw.
const freezeTimeout = 30 * time.Second

// wantFrozen tells the task's supervise loop whether its container is to
// be frozen. a.mu is held.
func (t *task) wantFrozen(on bool) {
	t.sigs.mu.Lock()
	changed := !t.sigs.known || t.sigs.frozen != on
	t.sigs.known, t.sigs.frozen = true, on
	t.sigs.mu.Unlock()
	if !changed {
		return
	}
	select {
	case t.sigs.kick <- struct{}{}:
	default:
	}
}

// applyFreeze brings c to the frozen or thawed state last asked for (the
// task's goroutine).
func (a *launcher) applyFreeze(t *task, c runtime.Container) {
	t.sigs.mu.Lock()
	known, want := t.sigs.known, t.sigs.frozen
	t.sigs.mu.Unlock()
	if !known || (want == t.frozen && t.frozenSet) {
		return
	}
	f, ok := c.(runtime.Freezer)
	if !ok {
		if want {
			a.log.Warn("the job is suspended but this node's runtime cannot freeze containers: it goes on running", "id", c.ID(), "runtime", a.rt.Name())
		}
		t.frozen, t.frozenSet = want, true
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), freezeTimeout)
	defer cancel()
	began := time.Now()
	var err error
	if want {
		err = f.Freeze(ctx)
	} else {
		err = f.Thaw(ctx)
	}
	switch {
	case errors.Is(err, runtime.ErrNotRunning):
		return
	case err != nil:
		a.log.Warn("container not frozen or thawed as its job asks", "id", c.ID(), "job", t.key.job, "freeze", want, "err", err)
		return
	}
	t.frozen, t.frozenSet = want, true
	if want {
		t.frozenCores = a.cpus.held(t.id())
		a.cpus.release(t.id())
		a.log.Info("container frozen: its job is suspended", "id", c.ID(), "job", t.key.job, "host", t.key.host, "took", time.Since(began))
		return
	}
	if clash := a.cpus.hold(t.id(), t.frozenCores); len(clash) > 0 {
		a.log.Warn("a thawed container's cores are held by another container: they share them until one ends", "id", c.ID(), "cores", clash)
	}
	t.frozenCores = nil
	a.log.Info("container thawed: its job resumed", "id", c.ID(), "job", t.key.job, "host", t.key.host, "took", time.Since(began))
}

// thawToStop thaws c, if this task froze it, so that the stop's SIGTERM
// reaches its processes and they can end (the task's goroutine).
func (a *launcher) thawToStop(t *task, c runtime.Container) {
	if !t.frozen {
		return
	}
	if f, ok := c.(runtime.Freezer); ok {
		ctx, cancel := context.WithTimeout(context.Background(), freezeTimeout)
		defer cancel()
		if err := f.Thaw(ctx); err != nil && !errors.Is(err, runtime.ErrNotRunning) {
			a.log.Warn("thawing a frozen container to stop it", "id", c.ID(), "err", err)
		}
	}
	t.frozen = false
}
