package fence

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/internal/procfs"
	"golang.org/x/sys/unix"
)

// Config is what a fence guards.
type Config struct {
	// LeaseFile is the nodelet's lease file. Required.
	LeaseFile string
	// Owner is the owner token of the nodelet instance this fence
	// guards; the fence exits when the file names another. Required.
	Owner string
	// Nodelet is that nodelet's pid. Required.
	Nodelet int
	// Runc and RuncRoot: runc's binary and the nodelet's `runc --root`;
	// every container under it is killed at the deadline. Empty: none.
	Runc, RuncRoot string
	// Children: kill every other descendant of the nodelet too (its
	// process and apptainer containers, its runc commands). Only when
	// the nodelet is a process of its own, never an agent inside a
	// test binary.
	Children bool
	// Poll bounds how long the fence sleeps between looks at the file
	// (default 1s): how late it notices a new owner or a removed file,
	// and how often it kills again while the lease stays expired.
	Poll time.Duration
	Log  *slog.Logger
}

// Run guards the nodelet's containers until the lease file is removed
// or taken over by another owner, or until the nodelet is gone and its
// containers are killed. wake, when it delivers, makes the fence look at
// the file at once (SIGTERM). It returns an error only when it cannot
// start.
func Run(ctx context.Context, cfg Config, wake <-chan os.Signal) error {
	if cfg.LeaseFile == "" || cfg.Owner == "" || cfg.Nodelet <= 0 {
		return errors.New("fence: needs a lease file, an owner and the nodelet's pid")
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	pidfd, err := unix.PidfdOpen(cfg.Nodelet, 0)
	if err != nil {
		return fmt.Errorf("fence: watching nodelet pid %d: %w", cfg.Nodelet, err)
	}
	defer unix.Close(pidfd)
	log := cfg.Log.With("nodelet", cfg.Nodelet)
	fenced := false // killed since the lease last ran out
	for {
		l, err := Read(cfg.LeaseFile)
		gone := exited(pidfd)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			log.Debug("fence: lease file removed (nodelet stopped cleanly): exiting")
			return nil
		case err == nil && l.Owner != cfg.Owner:
			log.Debug("fence: another nodelet keeps the lease now: exiting", "owner", l.Owner)
			return nil
		case err != nil:
			log.Error("fence: unreadable lease: treating it as expired", "err", err)
			l = Lease{Owner: cfg.Owner}
		}
		now := Now()
		if l.Expired(now) {
			if !fenced {
				log.Warn("fence: lease expired: killing the node's containers",
					"expired_ago", (now - l.Deadline).Round(time.Millisecond), "nodelet_gone", gone)
			}
			n := cfg.killAll(log)
			if !fenced {
				log.Warn("fence: containers killed", "killed", n, "took", (Now() - now).Round(time.Millisecond))
			}
			fenced = true
			if gone {
				log.Info("fence: nodelet gone and its containers killed: exiting")
				return nil
			}
		} else {
			fenced = false
		}
		wait := cfg.Poll
		if !l.Unfenced && !l.Expired(now) {
			wait = min(wait, l.Deadline-now+time.Millisecond)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// exited reports whether the process behind pidfd has exited.
func exited(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// killAll kills every container of the node; it returns how many
// containers and processes it signalled.
func (cfg Config) killAll(log *slog.Logger) int {
	n := 0
	if cfg.Runc != "" && cfg.RuncRoot != "" {
		n += killRunc(cfg.Runc, cfg.RuncRoot, log)
	}
	if cfg.Children {
		n += killChildren(cfg.Nodelet, log)
	}
	return n
}

// killRunc sends SIGKILL to the init of every container under root.
// Every troupe container has its own pid namespace, so the kernel kills
// all its processes once its init dies, forks in flight included.
func killRunc(runc, root string, log *slog.Logger) int {
	if _, err := os.Stat(root); err != nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, runc, "--root", root, "list", "-q").Output()
	if err != nil {
		log.Error("fence: runc list", "root", root, "err", err)
	}
	n := 0
	for _, id := range strings.Fields(string(out)) {
		b, err := exec.CommandContext(ctx, runc, "--root", root, "kill", id, "KILL").CombinedOutput()
		if err != nil && !strings.Contains(string(b), "not running") && !strings.Contains(string(b), "does not exist") {
			log.Error("fence: runc kill", "id", id, "err", err, "out", strings.TrimSpace(string(b)))
			continue
		}
		n++
	}
	return n
}

// killChildren sends SIGKILL to every descendant of pid but this
// process, a few rounds so that forks in flight are caught.
func killChildren(pid int, log *slog.Logger) int {
	n := 0
	for range 3 {
		kids := procfs.Descendants(pid, os.Getpid())
		if len(kids) == 0 {
			break
		}
		for _, k := range kids {
			if err := syscall.Kill(k, syscall.SIGKILL); err == nil {
				n++
			} else if !errors.Is(err, syscall.ESRCH) {
				log.Error("fence: kill", "pid", k, "err", err)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return n
}
