package nodelet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/gpu"
)

// Node health checks: the site's program (nodelet.hcl health_check, LBNL
// NHC or any script) and the nodelet's own checks, run at start before
// the node registers and then every interval. The verdict rides on every
// heartbeat (api.NodeHeartbeat.Health), and a change sends one at once:
// schedd drains a failing node by its health check and resumes it when
// it passes again, unless an admin drained it too.

// Health check defaults (nodelet.hcl health_check).
const (
	DefaultHealthInterval = 60 * time.Second
	DefaultHealthTimeout  = 30 * time.Second
)

// maxHealthReason bounds a failing check's reason, as schedd bounds a
// drain reason.
const maxHealthReason = 256

// maxHealthOutput bounds what is kept of the program's output: its
// first line is all that is read.
const maxHealthOutput = 64 << 10

// Free space below which the state or run directory's file system is
// full: a container's files and records could not be written.
const (
	minFreeBytes  = 64 << 20
	minFreeInodes = 1024
)

// HealthCheck is nodelet.hcl's health_check block.
type HealthCheck struct {
	// Program is run as root, with no arguments, every Interval: exit 0
	// is healthy; any other exit, or running past Timeout (its process
	// group is killed), fails the node with the first non-empty line
	// of its output (standard output, else standard error) as the
	// reason. "": no program; the nodelet's own checks still run.
	Program  string
	Interval time.Duration // DefaultHealthInterval when 0
	Timeout  time.Duration // DefaultHealthTimeout when 0
}

// withDefaults fills the zero durations and checks the program: an
// absolute path to an executable file, so that a typo is an error at
// start, not every node drained; and, since it runs as root, owned by
// root (or by the nodelet's own user) and writable by no one else.
func (h HealthCheck) withDefaults() (HealthCheck, error) {
	if h.Interval < 0 || h.Timeout < 0 {
		return h, fmt.Errorf("health_check: interval %s and timeout %s must not be negative", h.Interval, h.Timeout)
	}
	if h.Interval == 0 {
		h.Interval = DefaultHealthInterval
	}
	if h.Timeout == 0 {
		h.Timeout = DefaultHealthTimeout
	}
	if h.Program == "" {
		return h, nil
	}
	if !filepath.IsAbs(h.Program) {
		return h, fmt.Errorf("health_check program %q: want an absolute path", h.Program)
	}
	fi, err := os.Stat(h.Program)
	if err != nil {
		return h, fmt.Errorf("health_check program: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return h, fmt.Errorf("health_check program %s: not an executable file", h.Program)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Uid != 0 && int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0) {
		return h, fmt.Errorf("health_check program %s: %w: it runs as root, so it must be owned by root and writable by no one else (mode %s, owner uid %d)",
			h.Program, errUnsafeProgram, fi.Mode().Perm(), st.Uid)
	}
	return h, nil
}

// errUnsafeProgram: a health program others could change.
var errUnsafeProgram = errors.New("unsafe program")

// healthChecker runs the checks and keeps their verdict for the
// heartbeat.
type healthChecker struct {
	*agent
	// gpuStatus reads the GPUs' health (gpu.Statuses; a stand-in for
	// fake GPUs and tests).
	gpuStatus func() ([]gpu.Status, error)

	mu      sync.Mutex
	verdict api.NodeHealth
	// changed holds one signal when the verdict changed since the
	// heartbeat last took it.
	changed chan struct{}
}

func newHealthChecker(a *agent) *healthChecker {
	h := &healthChecker{agent: a, verdict: api.NodeHealth{OK: true}, changed: make(chan struct{}, 1)}
	h.gpuStatus = gpu.Statuses
	if a.cfg.FakeGPUs > 0 {
		h.gpuStatus = func() ([]gpu.Status, error) { return fakeGPUStatus(a.gpus), nil }
	}
	return h
}

// fakeGPUStatus is fake devices' health: always healthy.
func fakeGPUStatus(devs []gpu.Device) []gpu.Status {
	st := make([]gpu.Status, len(devs))
	for i, d := range devs {
		st[i] = gpu.Status{Index: d.Index}
	}
	return st
}

// current is the verdict the heartbeat carries.
func (h *healthChecker) current() api.NodeHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.verdict
}

// loop runs the checks every interval until ctx ends (the first run is
// Run's, before registering).
func (h *healthChecker) loop(ctx context.Context) {
	t := time.NewTicker(h.cfg.Health.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.check(ctx)
	}
}

// check runs every check once and records the verdict; a change is
// logged and signalled to the heartbeat.
func (h *healthChecker) check(ctx context.Context) api.NodeHealth {
	v := api.NodeHealth{OK: true}
	if why := h.builtin(ctx); why != "" {
		v = api.NodeHealth{Reason: trimReason(why)}
	} else if h.cfg.Health.Program != "" {
		if ok, why := runHealthProgram(ctx, h.cfg.Health.Program, h.cfg.Health.Timeout, h.healthEnv()); !ok {
			v = api.NodeHealth{Reason: why}
		}
	}
	if ctx.Err() != nil {
		return h.current() // cut short by the nodelet's stop: no verdict
	}
	h.mu.Lock()
	was := h.verdict
	h.verdict = v
	h.mu.Unlock()
	if v != was {
		if v.OK {
			h.log.Info("health check passes again", "was", was.Reason)
		} else {
			h.log.Warn("health check fails: schedd drains the node", "reason", v.Reason)
		}
		select {
		case h.changed <- struct{}{}:
		default:
		}
	}
	return v
}

// healthEnv is the program's environment: the nodelet's, with the
// node's name in TROUPE_NODE (a node's name in troupe need not be its
// host name).
func (h *healthChecker) healthEnv() []string {
	return append(os.Environ(), "TROUPE_NODE="+h.cfg.Name)
}

// builtin runs the nodelet's own checks, cheapest first, and says why
// the first failing one fails ("" when all pass): the state and run
// directories' file systems, the container runtime, the GPUs.
func (h *healthChecker) builtin(ctx context.Context) string {
	for _, d := range []struct{ what, dir string }{{"state dir", h.cfg.StateDir}, {"run dir", h.cfg.RunDir}} {
		if err := checkDir(d.dir); err != nil {
			return fmt.Sprintf("nodelet %s %s: %v", d.what, d.dir, err)
		}
	}
	if c, ok := h.rt.(interface{ Check(context.Context) error }); ok {
		cctx, cancel := context.WithTimeout(ctx, h.cfg.Health.Timeout)
		err := c.Check(cctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			return fmt.Sprintf("container runtime %s fails its check: %v", h.rt.Name(), err)
		}
	}
	if len(h.gpus) > 0 {
		st, err := h.gpuStatus()
		if err != nil {
			return fmt.Sprintf("GPUs: the driver no longer answers: %v", err)
		}
		if p := gpu.Problem(h.gpus, st); p != "" {
			return p
		}
	}
	return ""
}

// errFull and errReadOnly are checkDir's findings.
var (
	errFull     = errors.New("file system full")
	errReadOnly = errors.New("file system read-only")
)

// checkDir fails when dir's file system is read-only or nearly full (too
// little space or too few inodes left for a container's files), or a
// file cannot be made there.
func checkDir(dir string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	if st.Flags&stRdonly != 0 {
		return errReadOnly
	}
	if free := st.Bavail * uint64(st.Bsize); free < minFreeBytes {
		return fmt.Errorf("%w: %d MiB free", errFull, free>>20)
	}
	if st.Files > 0 && st.Ffree < minFreeInodes {
		return fmt.Errorf("%w: %d inodes free", errFull, st.Ffree)
	}
	f, err := os.CreateTemp(dir, ".health-")
	if err != nil {
		if errors.Is(err, syscall.EROFS) {
			return errReadOnly
		}
		return fmt.Errorf("cannot write: %w", err)
	}
	name := f.Name()
	_, werr := f.WriteString("ok\n")
	cerr := f.Close()
	_ = os.Remove(name)
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("cannot write: %w", err)
	}
	return nil
}

// stRdonly is statfs's ST_RDONLY flag (a read-only mount).
const stRdonly = 0x1

// runHealthProgram runs program with no arguments in its own process
// group, as NHC and Slurm's HealthCheckProgram are run: exit 0 is
// healthy. Otherwise the reason is the first non-empty line of its
// standard output, else of its standard error ("ERROR: nhc: Health check
// failed: ..."), else how it ended. Past timeout its whole process group
// is killed and it fails.
func runHealthProgram(ctx context.Context, program string, timeout time.Duration, env []string) (ok bool, reason string) {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, program)
	cmd.Env, cmd.Dir = env, "/"
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The group: a script's children (NHC's checks) go with it.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// A child that left the group yet holds the output open does not
	// hold the check past the timeout.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err == nil {
		return true, ""
	}
	first := firstLine(stdout.b.Bytes())
	if first == "" {
		first = firstLine(stderr.b.Bytes())
	}
	var ee *exec.ExitError
	switch {
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		why := fmt.Sprintf("health check %s timed out after %s", program, timeout)
		if first != "" {
			why += ": " + first
		}
		return false, trimReason(why)
	case first != "":
		return false, trimReason(first)
	case errors.As(err, &ee):
		return false, trimReason(fmt.Sprintf("health check %s failed: %v", program, ee))
	}
	return false, trimReason(fmt.Sprintf("health check %s cannot run: %v", program, err))
}

// firstLine is the first line of b with anything but spaces, trimmed.
func firstLine(b []byte) string {
	for line := range bytes.Lines(b) {
		if s := strings.TrimSpace(string(line)); s != "" {
			return s
		}
	}
	return ""
}

// trimReason bounds a reason to maxHealthReason bytes of valid UTF-8.
func trimReason(s string) string {
	if len(s) > maxHealthReason {
		s = strings.ToValidUTF8(s[:maxHealthReason], "")
	}
	return s
}

// capped keeps the first maxHealthOutput bytes written to it and
// discards the rest (the program is never blocked on a full pipe).
type capped struct{ b bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxHealthOutput - c.b.Len(); room > 0 {
		c.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
