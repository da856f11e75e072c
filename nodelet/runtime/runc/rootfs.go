package runc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// hostTopDirs are the host's top-level entries an ImageHost container sees.
// Those missing on the host are skipped.
var hostTopDirs = []string{
	"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/usr", "/etc", "/opt", "/var",
}

// buildHostRootfs makes rootfs a skeleton of the host's tree: a symlink
// for every top-level symlink (/bin -> usr/bin on merged-usr systems), an
// empty directory for every top-level directory. It returns the
// directories, which the container gets as read-only bind mounts.
func buildHostRootfs(rootfs string) ([]string, error) {
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return nil, err
	}
	var dirs []string
	for _, top := range hostTopDirs {
		fi, err := os.Lstat(top)
		if err != nil {
			continue
		}
		dst := filepath.Join(rootfs, top)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(top)
			if err != nil {
				return nil, err
			}
			if err := os.Symlink(target, dst); err != nil {
				return nil, fmt.Errorf("host rootfs: %w", err)
			}
		case fi.IsDir():
			if err := os.Mkdir(dst, 0o755); err != nil {
				return nil, fmt.Errorf("host rootfs: %w", err)
			}
			dirs = append(dirs, top)
		}
	}
	return dirs, nil
}

// mountOverlay mounts an overlay at mnt whose lower layer is the image
// directory lower (under layer, the Spec's, when set), read-only to the
// container (runc remounts its root read-only), and whose upper layer is
// the container's own (l.upper): the mountpoints runc makes (/dev,
// /proc, /home/work, mount targets the image lacks) go there, so nothing
// is ever written into the image.
func mountOverlay(lower, layer string, l layout, mnt string) error {
	for _, d := range []string{lower, layer} {
		if strings.ContainsAny(d, ",:\\") {
			return fmt.Errorf("image %s: %w: ',', ':' and '\\' cannot be in an overlay's lower directory", d, runtime.ErrInvalidSpec)
		}
	}
	fi, err := os.Stat(lower)
	if err != nil {
		return fmt.Errorf("image %s: %w", lower, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("image %s: %w: not a directory", lower, runtime.ErrInvalidSpec)
	}
	for _, d := range []string{l.upper(), l.work(), mnt} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	// The overlay's root takes the upper directory's owner and mode:
	// give it the image's, or "/" would be root's 0700.
	st := fi.Sys().(*syscall.Stat_t)
	if err := os.Chown(l.upper(), int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := os.Chmod(l.upper(), fi.Mode().Perm()); err != nil {
		return err
	}
	lowers := lower
	if layer != "" {
		lowers = layer + ":" + lower // the first is the top one
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lowers, l.upper(), l.work())
	if err := unix.Mount("overlay", mnt, "overlay", unix.MS_NODEV|unix.MS_NOSUID, opts); err != nil {
		return fmt.Errorf("image %s: overlay at %s: %w", lower, mnt, err)
	}
	return nil
}

// layerFits says whether a Spec's layer may lie over the image
// directory lower: its etc/ would hide the image's /etc whole where that
// is not a directory (a symbolic link, as in some images), so then its
// files are bind-mounted instead. Only lower's own entry is looked at,
// never through it.
func layerFits(lower string) bool {
	fi, err := os.Lstat(filepath.Join(lower, "etc"))
	return err != nil || fi.IsDir()
}

// unmountOverlay undoes mountOverlay (lazily: the container's mount
// namespace may still hold it a moment) and removes the mountpoint. An
// overlay that is not mounted is no error.
func unmountOverlay(mnt string) error {
	if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("unmounting %s: %w", mnt, err)
	}
	if err := os.Remove(mnt); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", mnt, err)
	}
	return nil
}
