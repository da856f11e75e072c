package runc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	godebug "runtime/debug"
	"syscall"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// Libcontainer is the OCI runtime name of the in-process mode (OCI()
// says "libcontainer VERSION").
const Libcontainer = "libcontainer"

// libcontainerModule is the module whose version OCI() reports.
const libcontainerModule = "github.com/opencontainers/runc"

// ErrNoSeccomp means this binary was built without libcontainer's
// seccomp support (the seccomp build tag and libseccomp), so it cannot
// apply the containers' filter.
var ErrNoSeccomp = errors.New("built without seccomp support (build with CGO_ENABLED=1 -tags seccomp and libseccomp's headers; make build does)")

// ErrNoCgo means this binary was built without cgo: libcontainer's
// container init (nsenter) and its seccomp support are C.
var ErrNoCgo = errors.New("built without cgo (CGO_ENABLED=1; make build does)")

// ErrNoInit means the running binary does not register LibcontainerInit,
// so it cannot be re-executed as a container's init.
var ErrNoInit = errors.New("this binary does not register the container init (runc.LibcontainerInit)")

// NewLibcontainer returns a runtime that drives containers in-process
// with runc's libcontainer instead of running an OCI runtime binary: one
// re-exec of this binary (LibcontainerInit) per container, no runc
// run/delete/state/kill processes. Its state is under stateDir/libcontainer,
// the rest (rootfs, images, bundle) as New's. The calling binary must
// register LibcontainerInit.
func NewLibcontainer(stateDir string) (*Runtime, error) {
	return NewLibcontainerIn(stateDir, stateDir)
}

// NewLibcontainerIn is NewLibcontainer with libcontainer's state
// (LibcontainerRoot(runDir)) and the overlays' mountpoints under runDir,
// as NewIn.
func NewLibcontainerIn(stateDir, runDir string) (*Runtime, error) {
	if err := libctUsable(); err != nil {
		return nil, err
	}
	r, err := newRuntime(LibcontainerRoot(runDir), stateDir, runDir)
	if err != nil {
		return nil, err
	}
	r.lib, r.oci = true, LibcontainerVersion()
	return r, nil
}

// LibcontainerRoot is the in-process mode's state directory (one
// directory per container, libcontainer's state.json in it) under dir,
// the runtime's runDir.
func LibcontainerRoot(dir string) string { return filepath.Join(dir, Libcontainer) }

// LibcontainerVersion is "libcontainer VERSION", the runc module this
// binary was built with.
func LibcontainerVersion() string {
	if bi, ok := godebug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == libcontainerModule {
				if d.Replace != nil {
					d = d.Replace
				}
				return Libcontainer + " " + d.Version
			}
		}
	}
	return Libcontainer
}

// libctList is the ids of the containers under the in-process mode's
// state directory.
func (r *Runtime) libctList() ([]string, error) {
	ents, err := os.ReadDir(r.root)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && idOK(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// signalAll sends sig to every task of container id's cgroup (SIGSTOP
// and SIGCONT, which troupe-init cannot forward).
func signalAll(id string, sig syscall.Signal) error {
	cg := cgroupOf(cgroupBase, id)
	pids := readPids(cg.procs)
	if len(pids) == 0 {
		return fmt.Errorf("container %s: %w", id, runtime.ErrNotRunning)
	}
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
	return nil
}
