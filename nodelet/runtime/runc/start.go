package runc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/nodelet/asuser"
	"github.com/troupe-hpc/troupe/nodelet/image"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// Start implements runtime.Runtime. It returns once runc has started the
// container, detached (runc run -d): its stdio are Spec.Stdout and
// Spec.Stderr themselves, not pipes through the nodelet, and it outlives
// the nodelet (see Recover).
func (r *Runtime) Start(ctx context.Context, s runtime.Spec) (runtime.Container, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Init == "" {
		return nil, fmt.Errorf("%w: runc needs the troupe-init binary", runtime.ErrInvalidSpec)
	}
	l := newLayout(s)
	files, spec, err := r.writeBundle(s, l)
	defer func() {
		for _, f := range files {
			f.Close() // troupe-init holds its own
		}
	}()
	if err != nil {
		_ = unmountOverlay(r.rootMount(s.ID))
		_ = os.RemoveAll(s.Dir)
		return nil, err
	}
	if r.fake {
		return r.startFake(s, l)
	}
	var (
		pid  int
		reap func()
	)
	if r.lib {
		pid, reap, err = r.launchLibct(ctx, s, spec, files)
	} else {
		pid, err = r.launch(ctx, s, l, files)
	}
	if err != nil {
		_ = r.delete(context.WithoutCancel(ctx), s.ID)
		_ = unmountOverlay(r.rootMount(s.ID))
		_ = os.RemoveAll(s.Dir)
		return nil, err
	}
	return r.attach(s.ID, l, pid, reap), nil
}

// Recover implements runtime.Runtime: runc state tells whether id still
// exists and its init's pid.
func (r *Runtime) Recover(ctx context.Context, id, dir string) (runtime.Container, error) {
	if !idOK(id) || !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%w: recover %q in %q", runtime.ErrInvalidSpec, id, dir)
	}
	if r.fake {
		return nil, fmt.Errorf("container %s: %w: %w", id, runtime.ErrNotFound, ErrFakeRecover)
	}
	var (
		st  state
		err error
	)
	if r.lib {
		st, err = r.libctState(id)
	} else {
		st, err = r.state(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	l := layout{dir: dir}
	if _, err := os.Stat(l.bundle()); err != nil {
		return nil, fmt.Errorf("container %s: bundle: %w", id, err)
	}
	pid := st.Pid
	if st.Status == "stopped" {
		pid = 0
	}
	return r.attach(id, l, pid, nil), nil
}

// idOK is runtime.Spec's id rule.
func idOK(id string) bool {
	return runtime.Spec{ID: id, Dir: "/", Init: "x"}.Validate() == nil
}

// writeBundle prepares home, the private directory with the exit file
// (and the attach socket), the root and config.json. It returns the
// files troupe-init inherits, in descriptor order from exitFD, and the
// spec written.
func (r *Runtime) writeBundle(s runtime.Spec, l layout) ([]*os.File, *specs.Spec, error) {
	files, err := r.prepare(s, l)
	if err != nil {
		return files, nil, err
	}
	root, hostDirs, layered := s.ImageOrHost(), []string(nil), false
	if root == runtime.ImageHost {
		dirs, err := buildHostRootfs(l.skeleton())
		if err != nil {
			return files, nil, err
		}
		root, hostDirs = l.skeleton(), dirs
	} else {
		images := r.images
		if images == nil {
			return files, nil, fmt.Errorf("image %s: this runtime has no image store", root)
		}
		var open image.OpenFunc // nil: the node's own reads, for a catalog image
		if s.ImageAsUser {
			open = asuser.Opener(asuser.Lookup(s.UID, s.GID))
		}
		lower, err := images.Rootfs(root, open)
		if err != nil {
			return files, nil, err
		}
		root = r.rootMount(s.ID)
		layered = s.Layer != "" && layerFits(lower)
		layer := ""
		if layered {
			layer = s.Layer
		}
		if err := mountOverlay(lower, layer, l, root); err != nil {
			return files, nil, err
		}
	}
	ms, err := jobTargets(s, l, root, hostDirs, layered)
	if err != nil {
		return files, nil, err
	}
	s.Mounts = ms
	spec := ociSpec(s, l, root, hostDirs, layered)
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return files, nil, err
	}
	return files, spec, os.WriteFile(filepath.Join(l.bundle(), "config.json"), b, 0o600)
}

// prepare makes the bundle directory, home and the private directory
// with the exit file (and the attach socket), and returns the files
// troupe-init inherits.
func (r *Runtime) prepare(s runtime.Spec, l layout) ([]*os.File, error) {
	if err := os.MkdirAll(l.bundle(), 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(l.home(), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if err := os.Lchown(l.home(), s.UID, s.GID); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(l.private()); err != nil {
		return nil, err
	}
	if err := os.Mkdir(l.private(), 0o700); err != nil {
		return nil, err
	}
	exit, err := os.OpenFile(l.exitFile(), os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	files := []*os.File{exit}
	if s.TTY {
		sock, err := attach.Bind(l.attachSock())
		if err != nil {
			return files, err
		}
		files = append(files, sock)
	}
	return files, nil
}

// launch runs `runc run -d` with files as the init's descriptors from
// exitFD on, in its own process group so that a
// terminal's ^C reaches the nodelet only, and returns the init's pid.
func (r *Runtime) launch(ctx context.Context, s runtime.Spec, l layout, files []*os.File) (int, error) {
	cmd := exec.CommandContext(ctx, r.binary, "--root", r.root, "--log", l.log(),
		"run", "-d", "--bundle", l.bundle(), "--pid-file", l.pidFile(),
		"--preserve-fds", strconv.Itoa(len(files)), s.ID)
	cmd.Dir = l.bundle()
	cmd.ExtraFiles = files
	if s.Stdout != nil {
		cmd.Stdout = s.Stdout
	}
	if s.Stderr != nil {
		cmd.Stderr = s.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("runc run %s: %v: %s", s.ID, err, lastLogError(l.log()))
	}
	b, err := os.ReadFile(l.pidFile())
	if err != nil {
		return 0, fmt.Errorf("runc run %s: pid file: %w", s.ID, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("runc run %s: bad pid file %q", s.ID, b)
	}
	return pid, nil
}

// lastLogError digs the last error message out of runc's JSON log.
func lastLogError(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "no runc log"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var e struct{ Level, Msg string }
		if json.Unmarshal([]byte(lines[i]), &e) == nil && e.Level == "error" {
			return e.Msg
		}
	}
	if len(lines) > 0 {
		return lines[len(lines)-1]
	}
	return "no message"
}
