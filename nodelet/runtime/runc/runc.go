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
//
//	status/              writable, at /.troupe/status: troupe-init's exit file
//
// The container runs detached (`runc --root <state>/runc run -d`) with
// the output file as its stdout and stderr, so it outlives the nodelet:
// Recover re-attaches to it by id. troupe-init is its pid 1, forwards
// signals to the command's process group and writes the exit status to
// status/exit; the nodelet waits on a pidfd of the init's pid. Namespaces: pid,
// mount, uts, ipc, and the network namespace Spec.NetNS names (the
// node's network when empty). Images other than "host" and rootfs
// directories (OCI layouts and archives, SIFs) are unpacked once into
// <state>/images by package image; every image's root is read-only (as
// with Apptainer): /tmp and /home/work are the writable places. Cgroup
// /troupe/<id> gets the CPU quota, memory limit and a pids limit.
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
	root   string       // runc --root: runc's state of our containers
	images *image.Store // unpacked OCI and SIF images, by digest

	mu   sync.Mutex
	live map[string]bool // started or recovered, not destroyed: Cleanup keeps them
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
// binary may be empty (see Find).
func New(binary, stateDir string) (*Runtime, error) {
	bin, err := Find(binary)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(stateDir, "runc")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	images, err := image.NewStore(filepath.Join(stateDir, "images"))
	if err != nil {
		return nil, err
	}
	return &Runtime{binary: bin, root: root, images: images, live: map[string]bool{}}, nil
}

// Name implements runtime.Runtime.
func (r *Runtime) Name() string { return Name }

// Cleanup force-deletes every container runc knows under our root,
// except those this Runtime started or recovered, and any cgroup they
// left.
func (r *Runtime) Cleanup(ctx context.Context) error {
	out, err := r.runc(ctx, "list", "-q")
	if err != nil {
		return fmt.Errorf("runc list: %w", err)
	}
	var errs []error
	for _, id := range strings.Fields(string(out)) {
		if r.isLive(id) {
			continue
		}
		if err := r.delete(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// delete force-deletes id; a container runc does not know is no error.
func (r *Runtime) delete(ctx context.Context, id string) error {
	out, err := r.runc(ctx, "delete", "--force", id)
	if err != nil && !notExist(out) {
		return fmt.Errorf("runc delete %s: %w: %s", id, err, bytes.TrimSpace(out))
	}
	return removeCgroups(id)
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
