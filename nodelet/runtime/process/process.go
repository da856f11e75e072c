// Package process runs containers as plain host processes, for nodes
// without runc (or without root). There is no isolation at all.
//
// What it cannot do, by design:
//   - Hostname: the command sees the node's hostname; only
//     BACKENDAI_CLUSTER_HOST names the container.
//   - Mounts are not applied. /etc/hosts and /etc/hostname mounts are
//     skipped (the host's files stay in force); a mount whose source and
//     target are the same path is visible anyway (shared file systems);
//     any other mount is ErrUnsupported.
//   - Image: only ImageHost; a rootfs directory is ErrUnsupported.
//   - CPU and memory limits are not enforced (accounted by schedd only).
//   - UID/GID are applied only when the nodelet runs as root; otherwise
//     the command runs as the nodelet's own user.
//   - /home/work does not exist: a Workdir missing on the host falls back
//     to the per-container directory Spec.Dir/home.
//
// The command runs in its own process group; Signal and Destroy address
// the whole group, so children started by a shell go too (a process that
// leaves the group, e.g. by setsid, escapes).
//
// It must not import the agent (package nodelet), internal/api or
// sched/...: a driver knows containers, not jobs.
package process

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// Name is the runtime's name.
const Name = "process"

// Runtime starts host processes. It is safe for concurrent use.
type Runtime struct{}

var _ runtime.Runtime = Runtime{}

// New returns the process runtime.
func New() Runtime { return Runtime{} }

// Name implements runtime.Runtime.
func (Runtime) Name() string { return Name }

// Cleanup implements runtime.Runtime. Process groups of a previous run
// are not tracked; there is nothing to clean.
func (Runtime) Cleanup(context.Context) error { return nil }

// Recover implements runtime.Runtime: process containers are the
// nodelet's children and are not re-attached to.
func (Runtime) Recover(context.Context, string, string) (runtime.Container, error) {
	return nil, fmt.Errorf("recover: %w", runtime.ErrUnsupported)
}

// Start implements runtime.Runtime.
func (Runtime) Start(_ context.Context, s runtime.Spec) (runtime.Container, error) {
	if err := check(s); err != nil {
		return nil, err
	}
	home := cmp.Or(s.Home, filepath.Join(s.Dir, "home"))
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chown(home, s.UID, s.GID); err != nil && os.Geteuid() == 0 {
		return nil, err
	}
	cmd := command(s, home)
	if s.TTY {
		sock, err := bindTerminal(s.Dir)
		if err != nil {
			_ = os.RemoveAll(s.Dir)
			return nil, err
		}
		defer sock.Close() // troupe-init holds its own
		cmd.ExtraFiles = []*os.File{sock}
	}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(s.Dir)
		return nil, fmt.Errorf("starting %s: %w", s.ID, err)
	}
	c := &container{id: s.ID, dir: s.Dir, cmd: cmd, pgid: cmd.Process.Pid, done: make(chan struct{})}
	go c.watch()
	return c, nil
}

// bindTerminal makes dir/private (0700) and binds the attach socket in
// it, for troupe-init to inherit as descriptor 3.
func bindTerminal(dir string) (*os.File, error) {
	priv := filepath.Dir(attachSock(dir))
	if err := os.RemoveAll(priv); err != nil {
		return nil, err
	}
	if err := os.Mkdir(priv, 0o700); err != nil {
		return nil, err
	}
	return attach.Bind(attachSock(dir))
}

// check refuses what this runtime cannot honour.
func check(s runtime.Spec) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.ImageOrHost() != runtime.ImageHost {
		return fmt.Errorf("image %s: %w (process runs on the host's tree)", s.Image, runtime.ErrUnsupported)
	}
	if s.NetNS != "" {
		return fmt.Errorf("network namespace %s: %w (process shares the node's network)", s.NetNS, runtime.ErrUnsupported)
	}
	for _, m := range s.Mounts {
		skip := m.Target == "/etc/hosts" || m.Target == "/etc/hostname" || m.Source == m.Target
		if !skip {
			return fmt.Errorf("mount at %s: %w", m.Target, runtime.ErrUnsupported)
		}
	}
	return nil
}

func command(s runtime.Spec, home string) *exec.Cmd {
	args := s.Args
	switch {
	case len(args) == 0:
		args = []string{s.Init, "wait"}
	case s.TTY:
		args = append([]string{s.Init, "--tty-fd", "3", "run", "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	if lp, err := lookPath(args[0], s.Env); err == nil {
		cmd.Path, cmd.Err = lp, nil
	}
	cmd.Env = s.Env
	cmd.Dir = s.WorkdirOrHome()
	if fi, err := os.Stat(cmd.Dir); err != nil || !fi.IsDir() {
		cmd.Dir = home
	}
	cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 && (s.UID != 0 || s.GID != 0) {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.GID)}
	}
	return cmd
}
