package runc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// Start implements runtime.Runtime. It returns once runc has created the
// container (its pid file exists) or has failed.
func (r *Runtime) Start(ctx context.Context, s runtime.Spec) (runtime.Container, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Init == "" {
		return nil, fmt.Errorf("%w: runc needs the troupe-init binary", runtime.ErrInvalidSpec)
	}
	l := layout{dir: s.Dir}
	if err := r.writeBundle(s, l); err != nil {
		_ = os.RemoveAll(s.Dir)
		return nil, err
	}
	c, err := r.launch(s, l)
	if err != nil {
		_ = os.RemoveAll(s.Dir)
		return nil, err
	}
	if err := c.awaitCreated(ctx); err != nil {
		_ = c.Destroy(context.WithoutCancel(ctx))
		return nil, err
	}
	if c.events != nil {
		c.watchEvents()
	}
	return c, nil
}

// writeBundle prepares home, rootfs and config.json.
func (r *Runtime) writeBundle(s runtime.Spec, l layout) error {
	if err := os.MkdirAll(l.bundle(), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(l.home(), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.Chown(l.home(), s.UID, s.GID); err != nil {
		return err
	}
	root, hostDirs := s.ImageOrHost(), []string(nil)
	if root == runtime.ImageHost {
		dirs, err := buildHostRootfs(l.rootfs())
		if err != nil {
			return err
		}
		root, hostDirs = l.rootfs(), dirs
	} else {
		images := r.images
		if images == nil {
			return fmt.Errorf("image %s: this runtime has no image store", root)
		}
		var err error
		if root, err = images.Rootfs(root); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(ociSpec(s, l, root, hostDirs), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(l.bundle(), "config.json"), b, 0o600)
}

// launch starts `runc run` in the foreground, in its own process group so
// that a terminal's ^C reaches the nodelet only.
func (r *Runtime) launch(s runtime.Spec, l layout) (*container, error) {
	cmd := exec.Command(r.binary, "--root", r.root, "--log", l.log(),
		"run", "--bundle", l.bundle(), "--pid-file", l.pidFile(), s.ID)
	cmd.Dir = l.bundle()
	if s.Stdout != nil {
		cmd.Stdout = s.Stdout
	}
	if s.Stderr != nil {
		cmd.Stderr = s.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting runc: %w", err)
	}
	c := &container{rt: r, id: s.ID, l: l, cmd: cmd, done: make(chan struct{})}
	if s.Memory > 0 {
		c.events = make(chan struct{})
	}
	go c.watch()
	return c, nil
}

// awaitCreated polls for runc's pid file; runc exiting first is a failed
// start, explained by runc's log.
func (c *container) awaitCreated(ctx context.Context) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(c.l.pidFile()); err == nil {
			return nil
		}
		select {
		case <-c.done:
			if _, err := os.Stat(c.l.pidFile()); err == nil {
				return nil // started and already exited
			}
			return fmt.Errorf("runc run %s: exit %d: %s", c.id, c.exit.Code, lastLogError(c.l.log()))
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
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
