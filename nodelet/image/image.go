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
// Unpacked images are cached under the Store's directory, so that every
// container of every job using the same image shares one read-only
// rootfs, unpacked once; the runc runtime mounts it read-only, like the
// host image. One cache entry serves every user, so an entry is named
// by a hash of exactly the bytes it was unpacked from, checked while
// they were unpacked, never by what a file claims about itself:
//
//   - OCI layouts and archives: the image's config digest. The manifest
//     is checked against the digest index.json gives, the config and
//     each layer blob against the manifest's digests and sizes, and each
//     layer's uncompressed tar against the config's diff_ids, all on the
//     very bytes read, while they are read: a blob is read once, hashed
//     as it is unpacked into a private directory, and that directory is
//     renamed into the cache only once every digest matched. A mismatch
//     fails the unpack (ErrDigest) and leaves nothing in the cache.
//   - `docker save` archives, whose manifest.json names no digests: the
//     config's own SHA-256 (the image ID), each layer checked against
//     the config's diff_ids as above. An OCI layout and a docker archive
//     of the same image share one entry.
//   - SIFs: the SHA-256 of the squashfs partition, copied out of the SIF
//     into a private file while it is hashed; unsquashfs reads that copy.
//     The SIF's header (ID, times) is not content and is not trusted.
//
// Since the name of an entry is the hash of its content, an image a user
// supplies shares an entry with a catalog image only when their verified
// content is identical; a user who copies a catalog image's index,
// manifest or SIF header next to content of his own gets an entry of his
// own, or a digest error.
//
// Files inside an image directory (an OCI layout's index.json and
// blobs) are opened with an OpenFunc: for an image a job named by path,
// the runtime passes one that opens them with the job's user's
// credentials; for a catalog image, OpenBeneath. Either follows no
// symbolic link and opens nothing but regular files beneath the
// directory. Archives are read once, as a whole, into a private
// directory before anything is taken from them (their own symbolic links
// are followed there only while they stay inside it). Extraction never
// writes outside its target (Untar's os.Root).
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

	"golang.org/x/sys/unix"
)

// ErrUnknownKind: the path is neither a directory nor an archive or SIF
// this package can read.
var ErrUnknownKind = errors.New("not an image this node can run")

// ErrDigest: a part of an image (a manifest, a config, a layer, its
// uncompressed tar) does not hash to the digest that names it.
var ErrDigest = errors.New("content does not match its digest")

// ErrNotRegular: a file of an image directory is a symbolic link, a
// directory or a device where a regular file must be.
var ErrNotRegular = errors.New("not a regular file (no symbolic link is followed in an image)")

// ErrEscape: a path inside an image leads out of it (a symbolic link
// to an absolute path, or up past the image's top).
var ErrEscape = errors.New("leads out of the image")

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

// Detect tells what ref is, looking at the file system. It follows no
// symbolic link inside a directory.
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
		if _, err := os.Lstat(filepath.Join(ref, layoutFileName)); err == nil {
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

// OpenFunc opens name (slash-separated, relative to dir) for reading: a
// regular file beneath dir, reached through no symbolic link, or an
// error. Store.Rootfs reads the files of an image directory (an OCI
// layout) through it, so that the caller chooses whose credentials
// open them.
type OpenFunc func(dir *os.File, name string) (*os.File, error)

// OpenBeneath is the node's own OpenFunc (root's credentials, for the
// catalog's images): openat2 beneath dir with no symbolic link, no magic
// link, regular files only.
func OpenBeneath(dir *os.File, name string) (*os.File, error) {
	return openat2(dir, name, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_NO_MAGICLINKS)
}

// openStaged is the OpenFunc of an archive's private copy: the archive's
// own symbolic links are followed (`docker save` links a layer that
// appears twice), but only while they stay beneath the copy.
func openStaged(dir *os.File, name string) (*os.File, error) {
	return openat2(dir, name, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_MAGICLINKS)
}

func openat2(dir *os.File, name string, resolve uint64) (*os.File, error) {
	for {
		fd, err := unix.Openat2(int(dir.Fd()), name, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC,
			Resolve: resolve,
		})
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			switch err {
			case unix.ELOOP:
				return nil, fmt.Errorf("%s: %w", name, ErrNotRegular)
			case unix.EXDEV: // what RESOLVE_BENEATH answers
				return nil, fmt.Errorf("%s: %w", name, ErrEscape)
			}
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		f := os.NewFile(uintptr(fd), name)
		if err := regular(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return f, nil
	}
}

// regular: f is a regular file; its O_NONBLOCK (which kept a FIFO from
// hanging the open) is cleared.
func regular(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return ErrNotRegular
	}
	_, err = unix.FcntlInt(f.Fd(), unix.F_SETFL, unix.O_RDONLY)
	return err
}

// openDir opens an image directory (O_PATH) for OpenFunc. The path
// itself is the admin's (a catalog source, which may be a symbolic link
// of his) or one the nodelet made (the pin of a user's directory, or a
// staging copy): only what is inside is the user's.
func openDir(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openFile opens an image file (an archive, a SIF) for reading: a
// catalog source or the pin of a user's file, as for openDir.
func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if err := regular(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Store unpacks images into a cache directory. It is safe for concurrent
// use; two containers asking for the same image wait for one unpack.
type Store struct {
	dir string

	mu    sync.Mutex
	locks map[string]*sync.Mutex
	sifs  map[fileID]string // SIF file → its content's key (sif.go)
	blobs map[fileID]string // layer blob a user gave → the digests it matched (oci.go)
	// archive file → its content's key (oci.go)
	archives map[fileID]string
}

// NewStore returns a store caching under dir (created when missing).
func NewStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Store{dir: dir, locks: map[string]*sync.Mutex{}, sifs: map[fileID]string{}, blobs: map[fileID]string{},
		archives: map[fileID]string{}}, nil
}

// Rootfs returns the root filesystem directory for ref: "host" and
// rootfs directories as they are, OCI layouts, archives and SIFs
// unpacked into the cache (once per content). The returned directory
// must not be written to.
//
// open nil: ref is the node's choice (a catalog image), read with
// root's credentials. Else ref is a user's, and the files inside an OCI
// layout directory are opened with open; and an entry already in the
// cache is given to a user's image only once its own layers were read
// and matched the digests (a user who has a manifest and a config only,
// of an image another user unpacked, gets ErrDigest, not its content).
func (s *Store) Rootfs(ref string, open OpenFunc) (string, error) {
	kind, err := Detect(ref)
	if err != nil {
		return "", err
	}
	trusted := open == nil
	if trusted {
		open = OpenBeneath
	}
	switch kind {
	case KindHost:
		return hostImage, nil
	case KindRootfs:
		return ref, nil
	case KindSIF:
		return s.sifRootfs(ref)
	default:
		return s.ociRootfs(ref, kind, open, trusted)
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

// stage makes a private (0700) directory in the cache's, where an image
// is copied and unpacked before its digests are known to match; the
// caller removes it.
func (s *Store) stage() (string, error) {
	return os.MkdirTemp(s.dir, ".unpack-")
}

// commit returns dir/key/rootfs; when it is not there yet, it runs fill
// on tmp/rootfs (made here) and then renames tmp, the staging directory,
// to dir/key. hit says the entry was there already (fill not run). Once
// committed, tmp no longer exists; else the caller removes it.
func (s *Store) commit(key, tmp string, fill func(rootfs string) error) (rootfs string, hit bool, err error) {
	rootfs, err = s.commitLocked(key, tmp, &hit, fill)
	return rootfs, hit, err
}

func (s *Store) commitLocked(key, tmp string, hit *bool, fill func(rootfs string) error) (string, error) {
	defer s.lock(key)()
	final := filepath.Join(s.dir, key)
	rootfs := filepath.Join(final, "rootfs")
	if _, err := os.Stat(rootfs); err == nil {
		*hit = true
		return rootfs, nil
	}
	if err := os.Mkdir(filepath.Join(tmp, "rootfs"), 0o755); err != nil {
		return "", err
	}
	if err := fill(filepath.Join(tmp, "rootfs")); err != nil {
		return "", err
	}
	ents, err := os.ReadDir(tmp) // the copies it was unpacked from
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		if e.Name() != "rootfs" {
			if err := os.RemoveAll(filepath.Join(tmp, e.Name())); err != nil {
				return "", err
			}
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
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
