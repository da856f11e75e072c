package runc

import (
	"fmt"
	"os"
	"path/filepath"
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
