// Package runc runs troupe containers with the runc binary from OCI
// bundles it writes itself.
//
// Per container, under Spec.Dir:
//
//	bundle/config.json   the OCI spec (specs-go types)
//	bundle/rootfs/       ImageHost only: skeleton whose top-level dirs are
//	                     read-only binds of the host's, symlinks kept
//	bundle/runc.log      runc's own log, quoted in start errors
//	home/                bind-mounted writable at /home/work, owned by UID
//	overlay/{upper,work} other images: the writable layer of the overlay
//	                     that is the container's root
//	private/             root's, 0700, mounted nowhere: exit (the exit
//	                     file) and attach.sock (Spec.TTY)
//
// and <state>/rootfs/<id>, the mountpoint of that overlay. An image
// directory is only ever the overlay's lower layer: the mountpoints runc
// makes go to the upper one, and the root is read-only in the container,
// so nothing is written into the image. Spec.Layer, when set, lies
// between the two (the top lower layer), and the mounts it holds
// (Mount.Layered, Spec.InitLayered) are not made; not where the image's
// /etc is other than a directory (layerFits), nor for ImageHost.
//
// The container runs detached (`runc --root <state>/runc run -d`) with
// the output file as its stdout and stderr, so it outlives the nodelet:
// Recover re-attaches to it by id. troupe-init is its pid 1, forwards
// signals to the command's process group and writes the exit status to
// the exit file, which the nodelet made and hands it as descriptor 3
// (runc run --preserve-fds); a Spec.TTY container's attach socket is
// bound by the nodelet and handed over as descriptor 4, and the nodelet
// connects only to a socket whose listener is the container's init
// (attach.DialPeer). No path the container can reach is opened by the
// nodelet. The nodelet waits on a pidfd of the init's pid. Namespaces:
// pid, mount, uts, ipc, and the network namespace Spec.NetNS names (the
// node's network when empty). Images other than "host" and rootfs
// directories (OCI layouts and archives, SIFs) are unpacked once into
// <state>/images by package image; every image's root is read-only (as
// with Apptainer): /tmp and /home/work are the writable places. Cgroup
// /troupe/<id> gets the CPU quota, memory limit and a pids limit; a
// seccomp filter in the spirit of Docker's default profile refuses what
// a batch job has no business calling (seccomp.go).
//
// Stopping (Signal SIGKILL, Destroy) lifts the CPU quota, freezes the
// cgroup, SIGKILLs every task and thaws it (killAll): a fork bomb under
// a CPU quota dies within seconds.
//
// NewLibcontainer is the same driver without an OCI runtime binary: it
// turns the same spec into libcontainer's config (specconv) and starts
// the container in-process with runc's libcontainer, the calling binary
// re-executed once as the container's init (LibcontainerInit). The
// init is the caller's child, reaped as it exits; libcontainer's state
// under <state>/libcontainer/<id> is what Recover and Cleanup read after
// a restart (and what `runc --root` reads as its own). Bundle, exit
// file, cgroups, killAll, usage and the OOM verdict are shared with the
// binary mode. It needs cgo and the seccomp build tag.
//
// It must not import the agent (package nodelet), internal/api or
// sched/...: a driver knows containers, not jobs.
package runc

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

	"github.com/troupe-hpc/troupe/nodelet/image"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// Name is the runtime's name.
const Name = "runc"

// ErrNoRunc means no runc binary was found.
var ErrNoRunc = errors.New("runc binary not found")

// Runtime starts containers with runc. It is safe for concurrent use.
type Runtime struct {
	binary string
	oci    string       // the binary's name and version (Version), for reports
	root   string       // runc --root: runc's state of our containers
	lib    bool         // in-process (NewLibcontainer): root is libcontainer's
	fake   bool         // benchmark mode (NewFakeIn): no OCI runtime, no process
	mnt    string       // mountpoints of image overlays, by container id
	images *image.Store // unpacked OCI and SIF images, by digest

	mu   sync.Mutex
	live map[string]bool // started or recovered, not destroyed: Cleanup keeps them

	// started are the in-process containers this Runtime started, by
	// id, until they are deleted: libcontainer's handle from their start
	// (libct_cgo.go), so that signalling and deleting one does not read
	// and decode its state file again. A container this Runtime did not
	// start (re-attached after a restart) is loaded from that file.
	started sync.Map
}

func (r *Runtime) remember(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[id] = true
}

func (r *Runtime) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, id)
}

func (r *Runtime) isLive(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live[id]
}

var _ runtime.Runtime = (*Runtime)(nil)

// Find returns the runc binary: binary when it names one, else runc on
// $PATH, else /usr/sbin/runc or /usr/bin/runc.
func Find(binary string) (string, error) {
	if binary != "" {
		return exec.LookPath(binary)
	}
	for _, cand := range []string{"runc", "/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc"} {
		if p, err := exec.LookPath(cand); err == nil {
			return p, nil
		}
	}
	return "", ErrNoRunc
}

// New returns a runtime that keeps runc's state under stateDir/runc.
// binary may be empty (see Find) or name another OCI runtime that takes
// runc's commands (crun; see Probe).
func New(binary, stateDir string) (*Runtime, error) {
	return NewIn(binary, stateDir, stateDir)
}

// NewIn is New with the OCI runtime's state (runDir/runc) and the
// images' overlay mountpoints (runDir/rootfs) under runDir, which holds
// only what exists while containers do (a tmpfs suits it); the image
// store stays under stateDir.
func NewIn(binary, stateDir, runDir string) (*Runtime, error) {
	bin, err := Find(binary)
	if err != nil {
		return nil, err
	}
	r, err := newRuntime(filepath.Join(runDir, "runc"), stateDir, runDir)
	if err != nil {
		return nil, err
	}
	r.binary, r.oci = bin, Version(context.Background(), bin)
	return r, nil
}

// newRuntime makes the state directories (root: the OCI runtime's; the
// overlays' mountpoints under runDir) and the image store under stateDir.
func newRuntime(root, stateDir, runDir string) (*Runtime, error) {
	mnt := filepath.Join(runDir, "rootfs")
	for _, d := range []string{root, mnt} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	images, err := image.NewStore(filepath.Join(stateDir, "images"))
	if err != nil {
		return nil, err
	}
	return &Runtime{root: root, mnt: mnt, images: images, live: map[string]bool{}}, nil
}

// Name implements runtime.Runtime.
func (r *Runtime) Name() string { return Name }

// Binary is the OCI runtime binary the driver runs; "" in the
// in-process mode (NewLibcontainer).
func (r *Runtime) Binary() string { return r.binary }

// Root is the OCI runtime's state root (runc --root), where its
// command line finds the containers, libcontainer's included.
func (r *Runtime) Root() string { return r.root }

// OCI is the OCI runtime binary's name and version, e.g. "crun 1.8.1".
func (r *Runtime) OCI() string { return r.oci }

// rootMount is where container id's image overlay is mounted.
func (r *Runtime) rootMount(id string) string { return filepath.Join(r.mnt, id) }

// Cleanup force-deletes every container runc knows under our root,
// except those this Runtime started or recovered, and any cgroup and
// image overlay they left (the fake mode, whose containers end with
// their nodelet, only the overlays).
func (r *Runtime) Cleanup(ctx context.Context) error {
	var ids []string
	var err error
	if !r.fake {
		ids, err = r.list(ctx)
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if r.isLive(id) {
			continue
		}
		if err := r.delete(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	ents, err := os.ReadDir(r.mnt)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range ents {
		if !r.isLive(e.Name()) {
			if err := unmountOverlay(r.rootMount(e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Check is a cheap form of the trial the driver passed at start (Probe,
// ProbeLibcontainer), for the node's health checks: the OCI runtime
// still runs and reads its state root (runc list; the in-process mode's
// state directory), and the cgroup hierarchy is still there.
func (r *Runtime) Check(ctx context.Context) error {
	if r.fake {
		return nil
	}
	if r.lib {
		if _, err := r.libctList(); err != nil {
			return fmt.Errorf("libcontainer state: %w", err)
		}
	} else if out, err := r.runc(ctx, "list", "-q"); err != nil {
		return fmt.Errorf("%s list: %w: %s", filepath.Base(r.binary), err, bytes.TrimSpace(out))
	}
	// cgroup v2 (cgroup.controllers at the top) or v1 (a directory per
	// controller): either way not empty.
	ents, err := os.ReadDir(cgroupBase)
	if err != nil {
		return fmt.Errorf("cgroup hierarchy: %w", err)
	}
	if len(ents) == 0 {
		return fmt.Errorf("cgroup hierarchy: %s is empty (not mounted)", cgroupBase)
	}
	return nil
}

// list is the ids of the containers under our root.
func (r *Runtime) list(ctx context.Context) ([]string, error) {
	if r.lib {
		return r.libctList()
	}
	out, err := r.runc(ctx, "list", "-q")
	if err != nil {
		return nil, fmt.Errorf("runc list: %w", err)
	}
	return strings.Fields(string(out)), nil
}

// delete kills every task of id (killAll), then force-deletes it; a
// container runc does not know is no error.
func (r *Runtime) delete(ctx context.Context, id string) error {
	if r.lib {
		return r.libctDelete(ctx, id)
	}
	kerr := killAll(ctx, cgroupBase, id)
	out, err := r.runc(ctx, "delete", "--force", id)
	if err != nil && !notExist(out) {
		return errors.Join(kerr, fmt.Errorf("runc delete %s: %w: %s", id, err, bytes.TrimSpace(out)))
	}
	return errors.Join(kerr, removeCgroups(id))
}

// runc runs a short runc command and returns its combined output.
func (r *Runtime) runc(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, r.binary, append([]string{"--root", r.root}, args...)...)
	return cmd.CombinedOutput()
}

func notExist(out []byte) bool {
	s := string(out)
	return strings.Contains(s, "does not exist") || strings.Contains(s, "not exist")
}
