package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ociRootfs unpacks an OCI layout or a docker/OCI archive, cached by the
// image's manifest digest.
func (s *Store) ociRootfs(ref string, kind Kind) (string, error) {
	img, cleanup, err := openOCI(ref, kind)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	defer cleanup()
	digest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	key := digest.Algorithm + "-" + digest.Hex
	return s.cached(key, func(rootfs string) error {
		rc := mutate.Extract(img) // flattened: whiteouts applied
		defer rc.Close()
		if err := Untar(rc, rootfs); err != nil {
			return fmt.Errorf("image %s: unpacking: %w", ref, err)
		}
		return nil
	})
}

// openOCI opens the image of a layout directory or an archive; cleanup
// removes what it had to unpack to read it.
func openOCI(ref string, kind Kind) (v1.Image, func(), error) {
	nop := func() {}
	if kind == KindOCILayout {
		img, err := fromLayout(ref)
		return img, nop, err
	}
	names, err := tarNames(ref)
	if err != nil {
		return nil, nop, err
	}
	if names["manifest.json"] {
		img, err := tarball.ImageFromPath(ref, nil)
		return img, nop, err
	}
	if !names[layoutFileName] {
		return nil, nop, errors.New("archive holds neither manifest.json (docker save) nor oci-layout (OCI archive)")
	}
	dir, err := os.MkdirTemp("", "troupe-oci-")
	if err != nil {
		return nil, nop, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	f, err := os.Open(ref)
	if err != nil {
		cleanup()
		return nil, nop, err
	}
	defer f.Close()
	if err := Untar(f, dir); err != nil {
		cleanup()
		return nil, nop, err
	}
	img, err := fromLayout(dir)
	if err != nil {
		cleanup()
		return nil, nop, err
	}
	return img, cleanup, nil
}

// fromLayout returns the only image of an OCI layout (the first one when
// its index lists several).
func fromLayout(dir string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.MediaType.IsImage() {
			return idx.Image(d.Digest)
		}
		if d.MediaType.IsIndex() {
			sub, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			sm, err := sub.IndexManifest()
			if err != nil {
				return nil, err
			}
			for _, sd := range sm.Manifests {
				if sd.MediaType.IsImage() && (sd.Platform == nil || sd.Platform.OS == "linux") {
					return sub.Image(sd.Digest)
				}
			}
		}
	}
	return nil, errors.New("OCI layout holds no image")
}

func tarNames(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading archive: %w", err)
		}
		names[strings.TrimPrefix(filepath.Clean(h.Name), "./")] = true
	}
}

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
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(strings.TrimLeft(h.Name, "/"))
		if name == "." {
			continue
		}
		if err := untarEntry(root, tr, h, name); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
}

func untarEntry(root *os.Root, tr *tar.Reader, h *tar.Header, name string) error {
	if d := filepath.Dir(name); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
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
		_ = root.Remove(name)
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
		_ = root.Remove(name)
		if err := root.Symlink(h.Linkname, name); err != nil {
			return err
		}
	case tar.TypeLink:
		_ = root.Remove(name)
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
