// Package image turns the images a job names into root filesystems runc
// can run, on nodes with no registry and no Apptainer:
//
//	"host"                    the node's own tree (left to the runtime)
//	directory                 a rootfs, used in place
//	directory with oci-layout an OCI image layout: unpacked
//	file *.tar, *.tar.gz      a `docker save` archive or an OCI archive
//	                          (a tar of an OCI layout): unpacked
//	file *.sif                a SIF: its primary squashfs partition is
//	                          unpacked with unsquashfs
//
// Unpacked images are cached under the Store's directory, keyed by the
// image's digest (OCI: the manifest digest; SIF: the SIF's ID and its
// partition's size and time), so that every container of every job using
// the same image shares one read-only rootfs, unpacked once. The runc
// runtime mounts it read-only, like the host image.
//
// It imports no troupe package.
package image

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ErrUnknownKind: the path is neither a directory nor an archive or SIF
// this package can read.
var ErrUnknownKind = errors.New("not an image this node can run")

// Kind is what a local image path holds.
type Kind string

// Image kinds.
const (
	KindHost       Kind = "host"
	KindRootfs     Kind = "rootfs"
	KindOCILayout  Kind = "oci-layout"
	KindArchive    Kind = "archive" // docker save or OCI archive
	KindSIF        Kind = "sif"
	hostImage           = "host"
	layoutFileName      = "oci-layout"
)

// Detect tells what ref is, looking at the file system.
func Detect(ref string) (Kind, error) {
	if ref == "" || ref == hostImage {
		return KindHost, nil
	}
	if !filepath.IsAbs(ref) {
		return "", fmt.Errorf("image %q: want \"host\", a catalog name or an absolute path", ref)
	}
	fi, err := os.Stat(ref)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(ref, layoutFileName)); err == nil {
			return KindOCILayout, nil
		}
		return KindRootfs, nil
	}
	lower := strings.ToLower(ref)
	switch {
	case strings.HasSuffix(lower, ".sif"):
		return KindSIF, nil
	case strings.HasSuffix(lower, ".tar"), strings.HasSuffix(lower, ".tar.gz"), strings.HasSuffix(lower, ".tgz"):
		return KindArchive, nil
	}
	if isSIF(ref) {
		return KindSIF, nil
	}
	return "", fmt.Errorf("image %s: %w (want a rootfs or OCI layout directory, a .tar archive or a .sif)", ref, ErrUnknownKind)
}

// Store unpacks images into a cache directory. It is safe for concurrent
// use; two containers asking for the same image wait for one unpack.
type Store struct {
	dir string

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// NewStore returns a store caching under dir (created when missing).
func NewStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Store{dir: dir, locks: map[string]*sync.Mutex{}}, nil
}

// Rootfs returns the root filesystem directory for ref: "host" and
// rootfs directories as they are, OCI layouts, archives and SIFs
// unpacked into the cache (once per digest). The returned directory must
// not be written to.
func (s *Store) Rootfs(ref string) (string, error) {
	kind, err := Detect(ref)
	if err != nil {
		return "", err
	}
	switch kind {
	case KindHost:
		return hostImage, nil
	case KindRootfs:
		return ref, nil
	case KindSIF:
		return s.sifRootfs(ref)
	default:
		return s.ociRootfs(ref, kind)
	}
}

// lock serialises the unpacking of one cache key.
func (s *Store) lock(key string) func() {
	s.mu.Lock()
	l := s.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		s.locks[key] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// cached returns dir/key/rootfs, running fill into a temporary directory
// first when it is not there yet, then renaming it into place.
func (s *Store) cached(key string, fill func(rootfs string) error) (string, error) {
	defer s.lock(key)()
	final := filepath.Join(s.dir, key)
	rootfs := filepath.Join(final, "rootfs")
	if _, err := os.Stat(rootfs); err == nil {
		return rootfs, nil
	}
	tmp, err := os.MkdirTemp(s.dir, ".unpack-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Mkdir(filepath.Join(tmp, "rootfs"), 0o755); err != nil {
		return "", err
	}
	if err := fill(filepath.Join(tmp, "rootfs")); err != nil {
		return "", err
	}
	_ = os.RemoveAll(final)
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	return rootfs, nil
}

// Dir is the cache directory.
func (s *Store) Dir() string { return s.dir }
