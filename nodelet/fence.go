package nodelet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/fence"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runc"
)

// leaseKeeper holds the node's lease from schedd, writes it to the lease
// file and keeps troupe-fence running to enforce it (package fence).
type leaseKeeper struct {
	path  string
	owner string
	args  []string // troupe-fence's command line
	log   *slog.Logger

	mu        sync.Mutex
	lease     fence.Lease
	every     time.Duration // heartbeat interval schedd announced; 0 none yet
	warned    bool          // logged that starts wait for a lease
	lapses    uint64        // times the lease ran out (once per deadline)
	lapsedAt  time.Duration // the deadline last counted in lapses
	stopping  bool
	proc      *os.Process
	exited    chan struct{} // closed when proc has been reaped
	supervise sync.WaitGroup
}

// startFence takes the lease file over and starts troupe-fence. The
// deadline a previous nodelet on this state dir left stays in force, so
// containers re-attached to stay within it; with no file there is no
// lease to keep yet and nothing is fenced until schedd grants one.
func (a *registrar) startFence() error {
	tok := make([]byte, 6)
	_, _ = rand.Read(tok)
	k := &leaseKeeper{
		path:  filepath.Join(a.cfg.StateDir, fence.FileName),
		owner: strconv.Itoa(os.Getpid()) + "." + hex.EncodeToString(tok),
		log:   a.log,
	}
	k.lease = fence.Lease{Owner: k.owner, Unfenced: true}
	switch old, err := fence.Read(k.path); {
	case err == nil:
		k.lease.Deadline, k.lease.Unfenced = old.Deadline, old.Unfenced
		a.log.Info("taking over the lease of the previous nodelet", "owner", old.Owner,
			"left", (old.Deadline - fence.Now()).Round(time.Millisecond), "unfenced", old.Unfenced)
	case errors.Is(err, fs.ErrNotExist):
	default:
		a.log.Warn("previous lease file unreadable: treating it as expired", "err", err)
		k.lease.Unfenced = false
	}
	if err := fence.Write(k.path, k.lease); err != nil {
		return err
	}
	k.args = []string{"--lease", k.path, "--owner", k.owner, "--nodelet-pid", strconv.Itoa(os.Getpid())}
	if a.rt.Name() == runc.Name && a.oci != runc.FakeOCI { // the fake OCI runtime's containers are no processes
		// The runtime keeps runc's state under its root (RunDir/runc),
		// or libcontainer's (runc.LibcontainerRoot) in the in-process
		// mode, whose state.json runc's command line reads as its own
		// (runc is libcontainer's command line).
		lib := strings.HasPrefix(a.oci, runc.Libcontainer)
		root := filepath.Join(a.cfg.RunDir, "runc")
		if lib {
			root = runc.LibcontainerRoot(a.cfg.RunDir)
		}
		if r, ok := a.rt.(interface{ Root() string }); ok {
			root = r.Root() // StateDir's, while a nodelet from before RunDir left containers there
		}
		switch bin, err := runc.Find(""); {
		case err == nil:
			k.args = append(k.args, "--runc", bin, "--runc-root", root)
		case !lib:
			return err
		case a.cfg.FenceChildren:
			// The in-process mode's containers are this nodelet's
			// children, which --children kills; after a restart
			// they are not, and only runc's command line finds them.
			a.log.Warn("no runc binary: at the lease's deadline the fence kills only the containers this nodelet started, not those it recovered", "err", err)
		default:
			return fmt.Errorf("the fence needs the runc binary to kill libcontainer's containers: %w", err)
		}
	}
	if a.cfg.FenceChildren {
		k.args = append(k.args, "--children")
	}
	if err := k.spawn(a.cfg.FenceBinary); err != nil {
		return err
	}
	k.supervise.Add(1)
	go k.keepRunning(a.cfg.FenceBinary)
	a.fence = k
	return nil
}

// spawn starts troupe-fence in a session of its own: a signal to the
// nodelet's process group (a terminal's ^Z) does not reach it.
func (k *leaseKeeper) spawn(bin string) error {
	cmd := exec.Command(bin, k.args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	k.mu.Lock()
	k.proc, k.exited = cmd.Process, exited
	k.mu.Unlock()
	return nil
}

// keepRunning restarts troupe-fence if it ends while the nodelet runs.
func (k *leaseKeeper) keepRunning(bin string) {
	defer k.supervise.Done()
	for {
		k.mu.Lock()
		exited := k.exited
		k.mu.Unlock()
		<-exited
		k.mu.Lock()
		stopping := k.stopping
		k.mu.Unlock()
		if stopping {
			return
		}
		k.log.Error("troupe-fence exited while the nodelet runs: restarting it")
		time.Sleep(time.Second)
		if err := k.spawn(bin); err != nil {
			k.log.Error("restarting troupe-fence", "err", err)
			return
		}
	}
}

// grant records a lease schedd granted in answer to a request sent at
// sent (fence.Now). It reports whether the lease had run out before: the
// caller then starts what waited for it.
func (k *leaseKeeper) grant(sent time.Duration, l api.NodeLease) (renewed bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	was := k.lease
	k.every = l.Heartbeat
	next := fence.Lease{Owner: k.owner}
	if l.Lease <= 0 {
		if !was.Unfenced {
			k.log.Warn("schedd announces no lease: this node's containers are not fenced")
		}
		next.Unfenced = true
	} else {
		next.Deadline = max(sent+l.Lease, was.Deadline)
		if was.Unfenced {
			next.Deadline = sent + l.Lease
		}
	}
	if err := fence.Write(k.path, next); err != nil {
		k.log.Error("writing the lease file: the fence will stop the containers at the old deadline", "err", err)
		return false
	}
	k.lease = next
	expired := k.lapsed(was, fence.Now())
	if expired {
		k.log.Info("lease granted again: starting containers")
		k.warned = false
	}
	return expired
}

// valid reports whether containers may run now; the first refusal of a
// stretch is logged.
func (k *leaseKeeper) valid() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.lapsed(k.lease, fence.Now()) {
		return true
	}
	if !k.warned {
		k.warned = true
		k.log.Warn("no lease from schedd: starting nothing until it grants one")
	}
	return false
}

// expired reports whether the lease has run out (the fence kills).
func (k *leaseKeeper) expired() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lapsed(k.lease, fence.Now())
}

// lapsed reports whether l has run out at now, and counts its running
// out once per deadline (k.mu held). Every lapse is seen: the renewal
// that ends it checks the lease it replaces, and so do starts and
// scrapes while it lasts.
func (k *leaseKeeper) lapsed(l fence.Lease, now time.Duration) bool {
	if !l.Expired(now) {
		return false
	}
	if k.lapses == 0 || k.lapsedAt != l.Deadline {
		k.lapses++
		k.lapsedAt = l.Deadline
	}
	return true
}

// status is what the metrics show of the lease: the time left to it
// (negative once it has run out; fenced false when schedd announced no
// lease) and how many times it has run out.
func (k *leaseKeeper) status() (left time.Duration, fenced bool, lapses uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := fence.Now()
	k.lapsed(k.lease, now)
	return k.lease.Deadline - now, !k.lease.Unfenced, k.lapses
}

// heartbeatEvery is the heartbeat interval: schedd's, capped by max.
func (k *leaseKeeper) heartbeatEvery(max time.Duration) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := k.every
	if d <= 0 {
		d = DefaultHeartbeat
	}
	if max > 0 && max < d {
		d = max
	}
	return d
}

// stop ends the fence: with clean (every container destroyed) the
// lease file goes and troupe-fence exits; otherwise (detaching) it
// stays, guarding the containers left running until the next nodelet
// takes the lease over or the deadline kills them.
func (k *leaseKeeper) stop(clean bool) {
	k.mu.Lock()
	k.stopping = true
	proc, exited := k.proc, k.exited
	k.mu.Unlock()
	if !clean {
		return
	}
	if err := os.Remove(k.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		k.log.Error("removing the lease file", "err", err)
	}
	_ = proc.Signal(syscall.SIGTERM) // look now: the file is gone
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		k.log.Warn("troupe-fence did not exit; killing it")
		_ = proc.Kill()
		<-exited
	}
	k.supervise.Wait()
}

// fenceMessage explains an exit that came after the lease ran out: the
// fence killed the container.
func (a *registrar) fenceMessage(state api.ContainerState, msg string) (api.ContainerState, string) {
	if a.fence == nil || !a.fence.expired() || state != api.ContainerExited {
		return state, msg
	}
	a.metrics.fenceKills.Inc()
	return api.ContainerFailed, "killed by the node's fence: no answer from schedd within the lease (nodelet(8), FENCING)"
}
