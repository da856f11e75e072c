package nodelet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinsDir holds, per container being started, bind mounts of the files
// the job's user opened (mount sources, an image given by path): the
// runtime mounts these, never the paths the job named, so nothing can be
// swapped between the check as the user and the mount. They live only
// while the container starts (its mount namespace keeps its own copies),
// in RunDir.
func (a *agent) pinsDir() string { return filepath.Join(a.cfg.RunDir, "pins") }

// pin bind-mounts the opened file f (which asuser.Open opened with the user's credentials, so
// /proc/self/fd/N is exactly what the user may reach) at dir/name, made
// private so that nothing propagates, and returns that path.
func pin(f *os.File, dir, name string) (string, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if fi.IsDir() {
		err = os.Mkdir(p, 0o700)
	} else {
		var g *os.File
		if g, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			err = g.Close()
		}
	}
	if err != nil {
		return "", err
	}
	src := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if err := unix.Mount(src, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return "", fmt.Errorf("pinning %s: %w", f.Name(), err)
	}
	if err := unix.Mount("", p, "", unix.MS_PRIVATE|unix.MS_REC, ""); err != nil {
		_ = unix.Unmount(p, unix.MNT_DETACH)
		return "", fmt.Errorf("pinning %s: %w", f.Name(), err)
	}
	return p, nil
}

// unpin unmounts every pin under p and removes the mountpoints, never
// descending into anything still mounted (a user's files are never
// removed: no RemoveAll here).
func unpin(p string) error {
	for {
		err := unix.Unmount(p, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break // not (or no longer) a mountpoint
		}
		if err != nil {
			return fmt.Errorf("unpinning %s: %w", p, err)
		}
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		if mounted, err := isMountpoint(p); err != nil || mounted {
			return fmt.Errorf("unpinning %s: still a mountpoint (%v)", p, err)
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := unpin(filepath.Join(p, e.Name())); err != nil {
				return err
			}
		}
	}
	return os.Remove(p)
}

// isMountpoint: p is on another device than its parent, or the root of
// a bind mount of the same device (statx's STATX_ATTR_MOUNT_ROOT).
func isMountpoint(p string) (bool, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
		return false, err
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	var parent unix.Stat_t
	if err := unix.Lstat(filepath.Dir(p), &parent); err != nil {
		return false, err
	}
	return uint64(unix.Mkdev(st.Dev_major, st.Dev_minor)) != uint64(parent.Dev), nil
}
