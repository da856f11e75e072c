//go:build cgo

package runc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/seccomp"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	// The device cgroup rules every container has (all denied but its
	// GPUs) need libcontainer's device controller.
	_ "github.com/opencontainers/cgroups/devices"

	"github.com/troupe-hpc/troupe/internal/backoff"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// initRegistered is set by LibcontainerInit: only a binary that calls it
// is ever re-executed as a container's init.
var initRegistered bool

// LibcontainerInit is the container init of the in-process mode: the
// binary that starts containers with NewLibcontainer is re-executed by
// libcontainer as `BINARY init` (with its sync pipe in the environment)
// to become each container's first process, set it up and exec its
// command. The program's main package must call it from an init
// function, before anything else runs, and import
// github.com/opencontainers/runc/libcontainer/nsenter, whose C
// constructor joins the namespaces first. Any other invocation returns
// at once (two string compares).
func LibcontainerInit() {
	initRegistered = true
	if len(os.Args) > 1 && os.Args[1] == "init" && os.Getenv("_LIBCONTAINER_SYNCPIPE") != "" {
		libcontainer.Init() // does not return
	}
}

// libctUsable says why this binary cannot run the in-process mode.
func libctUsable() error {
	if !initRegistered {
		return fmt.Errorf("%s: %w", Libcontainer, ErrNoInit)
	}
	if !seccomp.Enabled {
		return fmt.Errorf("%s: %w", Libcontainer, ErrNoSeccomp)
	}
	return nil
}

// libctConfig turns the bundle's OCI spec into libcontainer's config the
// way runc does (specconv): the same namespaces, cgroup /troupe/<id>,
// mounts, masked paths and seccomp filter.
func libctConfig(id string, spec *specs.Spec) (*configs.Config, error) {
	return specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName: id,
		Spec:       spec,
	})
}

// libctProcess is the container's first process as the spec describes
// it, with stdout, stderr and the inherited descriptors (from exitFD on).
func libctProcess(p *specs.Process, stdout, stderr *os.File, files []*os.File) *libcontainer.Process {
	nnp := p.NoNewPrivileges
	lp := &libcontainer.Process{
		Args:            p.Args,
		Env:             p.Env,
		UID:             int(p.User.UID),
		GID:             int(p.User.GID),
		Cwd:             p.Cwd,
		NoNewPrivileges: &nnp,
		ExtraFiles:      files,
		Init:            true,
	}
	// Nil writers, not nil *os.File in an interface: the child's stdio
	// is then /dev/null.
	if stdout != nil {
		lp.Stdout = stdout
	}
	if stderr != nil {
		lp.Stderr = stderr
	}
	if c := p.Capabilities; c != nil {
		lp.Capabilities = &configs.Capabilities{Bounding: c.Bounding, Effective: c.Effective,
			Inheritable: c.Inheritable, Permitted: c.Permitted, Ambient: c.Ambient}
	}
	for _, g := range p.User.AdditionalGids {
		lp.AdditionalGroups = append(lp.AdditionalGroups, int(g))
	}
	for _, rl := range p.Rlimits {
		if rl.Type == "RLIMIT_NOFILE" { // the only one ociSpec sets
			lp.Rlimits = append(lp.Rlimits, configs.Rlimit{Type: unix.RLIMIT_NOFILE, Hard: rl.Hard, Soft: rl.Soft})
		}
	}
	return lp
}

// libctRun creates container id under root from spec and runs its first
// process. It returns once the process has exec'd its command (the init
// is this process's child: the caller must reap it with the returned
// Process's Wait). On error nothing of the container is left in
// libcontainer's state (its cgroup neither).
func libctRun(root, id string, spec *specs.Spec, stdout, stderr *os.File, files []*os.File) (*libcontainer.Container, *libcontainer.Process, error) {
	cfg, err := libctConfig(id, spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: config: %w", Libcontainer, id, err)
	}
	c, err := libcontainer.Create(root, id, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: create: %w", Libcontainer, id, err)
	}
	p := libctProcess(spec.Process, stdout, stderr, files)
	if err := c.Run(p); err != nil {
		_ = c.Destroy()
		return nil, nil, fmt.Errorf("%s %s: run: %w", Libcontainer, id, err)
	}
	return c, p, nil
}

// launchLibct is launch for the in-process mode: the container's init
// is this process's child, and reap waits for it (Wait4 through
// os/exec), so that no zombie stays behind. ctx ending before the
// container runs kills whatever of it is in its cgroup already (an init
// stuck setting up mounts), which ends the start with ctx's error.
func (r *Runtime) launchLibct(ctx context.Context, s runtime.Spec, spec *specs.Spec, files []*os.File) (pid int, reap func(), err error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	started := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-started:
			return
		}
		for { // the cgroup may not be there yet
			kctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = killAll(kctx, cgroupBase, s.ID)
			cancel()
			select {
			case <-started:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	c, p, err := libctRun(r.root, s.ID, spec, s.Stdout, s.Stderr, files)
	close(started)
	<-stopped
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		return 0, nil, err
	}
	pid, err = p.Pid()
	if err != nil {
		return 0, nil, err
	}
	r.started.Store(s.ID, c)
	return pid, func() { _, _ = p.Wait() }, nil
}

// libctLoad is container id as libcontainer knows it: the handle from
// its start when this Runtime started it, else loaded from its state
// directory. With forget, a handle from the start is dropped (the
// container is being deleted).
func (r *Runtime) libctLoad(id string, forget bool) (*libcontainer.Container, error) {
	var h any
	var ok bool
	if forget {
		h, ok = r.started.LoadAndDelete(id)
	} else {
		h, ok = r.started.Load(id)
	}
	if ok {
		return h.(*libcontainer.Container), nil
	}
	return libcontainer.Load(r.root, id)
}

// libctState is state for the in-process mode: libcontainer's state
// directory of id says its init's pid and whether it still runs.
func (r *Runtime) libctState(id string) (state, error) {
	c, err := libcontainer.Load(r.root, id)
	if err != nil {
		if errors.Is(err, libcontainer.ErrNotExist) {
			return state{}, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
		}
		return state{}, fmt.Errorf("%s %s: load: %w", Libcontainer, id, err)
	}
	st, err := c.State()
	if err != nil {
		return state{}, fmt.Errorf("%s %s: state: %w", Libcontainer, id, err)
	}
	status, err := c.Status()
	if err != nil {
		return state{}, fmt.Errorf("%s %s: status: %w", Libcontainer, id, err)
	}
	return state{Status: status.String(), Pid: st.InitProcessPid}, nil
}

// destroyWait bounds how long libctDelete waits for a killed init to
// finish exiting.
const destroyWait = 5 * time.Second

// libctDelete is delete's in-process mode: every task killed (killAll),
// then libcontainer removes the cgroups and its state directory. An id
// libcontainer does not know is no error; one whose state it cannot
// read has its state directory removed all the same.
func (r *Runtime) libctDelete(ctx context.Context, id string) error {
	kerr := killAll(ctx, cgroupBase, id)
	c, err := r.libctLoad(id, true)
	switch {
	case errors.Is(err, libcontainer.ErrNotExist):
	case err != nil:
		err = errors.Join(err, os.RemoveAll(filepath.Join(r.root, id)))
	default:
		// killAll has emptied the cgroup, but a task leaves cgroup.procs
		// a moment before it is a zombie, and Destroy refuses a container
		// whose init is not one yet (ErrRunning): ask again until it is.
		err = c.Destroy()
		for deadline := time.Now().Add(destroyWait); errors.Is(err, libcontainer.ErrRunning) && time.Now().Before(deadline); {
			if backoff.Sleep(ctx, 5*time.Millisecond) != nil {
				break
			}
			err = c.Destroy()
		}
	}
	if err != nil {
		err = fmt.Errorf("%s delete %s: %w", Libcontainer, id, err)
	}
	return errors.Join(kerr, err, removeCgroups(id))
}

// libctSignal sends sig to container id's init through libcontainer,
// which checks that the pid is still the init it started.
func (r *Runtime) libctSignal(id string, sig syscall.Signal) error {
	c, err := r.libctLoad(id, false)
	if err != nil {
		if errors.Is(err, libcontainer.ErrNotExist) {
			return fmt.Errorf("container %s: %w", id, runtime.ErrNotRunning)
		}
		return fmt.Errorf("%s kill %s: %w", Libcontainer, id, err)
	}
	if err := c.Signal(sig); err != nil {
		if errors.Is(err, libcontainer.ErrNotRunning) {
			return fmt.Errorf("container %s: %w", id, runtime.ErrNotRunning)
		}
		return fmt.Errorf("%s kill %s: %w", Libcontainer, id, err)
	}
	return nil
}

// libctFreeze is Freeze (freeze) or Thaw for the in-process mode:
// libcontainer's Pause and Resume.
func (r *Runtime) libctFreeze(id string, freeze bool) error {
	c, err := r.libctLoad(id, false)
	if err != nil {
		if errors.Is(err, libcontainer.ErrNotExist) {
			return fmt.Errorf("container %s: %w", id, runtime.ErrNotRunning)
		}
		return fmt.Errorf("%s load %s: %w", Libcontainer, id, err)
	}
	if freeze {
		err = c.Pause()
	} else {
		err = c.Resume()
	}
	if errors.Is(err, libcontainer.ErrNotRunning) {
		return fmt.Errorf("container %s: %w", id, runtime.ErrNotRunning)
	}
	return err
}

// ProbeLibcontainer runs Probe's trial container in-process (the calling
// binary as its init, see LibcontainerInit): the same spec, cgroup,
// seccomp filter and check of its output. It says why the in-process
// mode cannot run here: a binary built without cgo (no nsenter) or
// without seccomp support, a kernel or cgroup layout libcontainer
// refuses. Its state lives in a fresh directory under dir, removed
// afterwards. Needs root.
func ProbeLibcontainer(ctx context.Context, init, dir string) error {
	if err := libctUsable(); err != nil {
		return err
	}
	tmp, id, spec, err := trialSpec(init, dir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	out, err := os.CreateTemp(tmp, "out-")
	if err != nil {
		return err
	}
	defer out.Close()
	root := filepath.Join(tmp, "state")
	c, p, err := libctRun(root, id, spec, out, out, nil)
	if err != nil {
		_ = removeCgroups(id)
		return fmt.Errorf("trial container: %w", err)
	}
	waited := make(chan struct{})
	go func() { _, _ = p.Wait(); close(waited) }()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	select {
	case <-waited:
	case <-ctx.Done():
		_ = killAll(context.Background(), cgroupBase, id)
		<-waited
	}
	derr := errors.Join(c.Destroy(), removeCgroups(id))
	b, _ := os.ReadFile(out.Name())
	if strings.Contains(string(b), "usage: troupe-init") {
		return derr
	}
	if ctx.Err() != nil {
		return fmt.Errorf("trial container: no answer in %s", probeTimeout)
	}
	return fmt.Errorf("trial container: did not run its process: %q", strings.TrimSpace(string(b)))
}
