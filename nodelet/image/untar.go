package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Untar unpacks a tar stream into dir. Every entry is created through an
// os.Root, so neither "..", absolute names nor symlinks planted by
// earlier entries can write outside dir. Devices are skipped (the runtime
// provides /dev); ownership is kept when running as root.
func Untar(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return untar(r, root, false)
}

// Whiteouts: a layer's file ".wh.NAME" removes NAME of the layers below;
// ".wh..wh..opq" empties its directory of them.
const (
	whiteout = ".wh."
	opaque   = ".wh..wh..opq"
)

// untar unpacks r into root; layer: r is an image layer laid over what
// root holds (whiteouts applied, an entry replaces what is there).
func untar(r io.Reader, root *os.Root, layer bool) error {
	tr := tar.NewReader(r)
	seen := map[string]bool{} // this layer's entries, which an opaque whiteout keeps
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(strings.TrimLeft(h.Name, "/"))
		if name == "." || name == ".." || strings.HasPrefix(name, "../") {
			continue
		}
		if layer {
			base, parent := filepath.Base(name), filepath.Dir(name)
			if base == opaque {
				if err := emptyDir(root, parent, seen); err != nil {
					return fmt.Errorf("%s: %w", h.Name, err)
				}
				continue
			}
			if strings.HasPrefix(base, whiteout) {
				if err := root.RemoveAll(filepath.Join(parent, strings.TrimPrefix(base, whiteout))); err != nil {
					return fmt.Errorf("%s: %w", h.Name, err)
				}
				continue
			}
			seen[name] = true
		}
		if err := untarEntry(root, tr, h, name, layer); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
}

// emptyDir removes dir's entries that this layer did not make.
func emptyDir(root *os.Root, dir string, seen map[string]bool) error {
	d, err := root.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if !seen[p] {
			if err := root.RemoveAll(p); err != nil {
				return err
			}
		}
	}
	return nil
}

func untarEntry(root *os.Root, tr *tar.Reader, h *tar.Header, name string, layer bool) error {
	if d := filepath.Dir(name); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// What is there already goes, unless both are directories.
	if fi, err := root.Lstat(name); err == nil && !(fi.IsDir() && h.Typeflag == tar.TypeDir) {
		if layer {
			err = root.RemoveAll(name)
		} else {
			err = root.Remove(name)
		}
		if err != nil && h.Typeflag != tar.TypeDir {
			return err
		}
	}
	mode := os.FileMode(h.Mode) & os.ModePerm
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, mode); err != nil {
			return err
		}
	case tar.TypeReg:
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := root.Symlink(h.Linkname, name); err != nil {
			return err
		}
	case tar.TypeLink:
		if err := root.Link(filepath.Clean(strings.TrimLeft(h.Linkname, "/")), name); err != nil {
			return err
		}
	default:
		return nil // devices, fifos: not needed in a rootfs
	}
	if os.Geteuid() == 0 {
		if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
			return err
		}
	}
	if h.Typeflag != tar.TypeSymlink && h.Typeflag != tar.TypeLink {
		// setuid/setgid bits are dropped: containers run with no_new_privs.
		return root.Chmod(name, mode)
	}
	return nil
}
