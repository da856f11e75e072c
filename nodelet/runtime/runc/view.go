package runc

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// mountKind says what is under one mount of the container's tree while
// runc makes the job's mounts.
type mountKind int

const (
	// kindOverlay: the image's overlay root (its owner may change the
	// image directory under it; pin makes the path runc takes root's).
	kindOverlay mountKind = iota
	// kindNode: files only root changes before the container starts
	// (the host image's skeleton, the home, the node's own files).
	kindNode
	// kindHost: a directory of the host (the host image's /usr, /var):
	// names are taken from directories only root may write.
	kindHost
	// kindEmpty: a file system that starts empty (/tmp).
	kindEmpty
	// kindJob: a job's mount source, which its user may change.
	kindJob
)

// viewMount is one mount of the container's tree.
type viewMount struct {
	target string // in the container, resolved
	host   string // what is mounted there (kindEmpty: nothing)
	kind   mountKind
	job    string // kindJob: the mount block's name
}

// view is the container's tree as runc builds it, mount by mount.
type view struct {
	mounts []viewMount
	layer  string // the node's layer, when it is the overlay's top lower one
}

// maxLinks bounds the symbolic links one resolution follows (as the
// kernel's 40, and securejoin's 255, do).
const maxLinks = 255

var (
	errThroughJob = errors.New("leads through another mount's source, which its owner can change")
	errChanged    = errors.New("changed while it was resolved")
	errHostMount  = errors.New("leads into a mount of the host's, which the container does not have")
)

// under says whether p is dir or below it, and p relative to dir ("."
// for dir itself).
func under(p, dir string) (string, bool) {
	switch {
	case p == dir:
		return ".", true
	case dir == "/":
		return p[1:], true
	case strings.HasPrefix(p, dir+"/"):
		return p[len(dir)+1:], true
	}
	return "", false
}

// at is the mount p lies in (the last made on or above it) and p
// relative to its root.
func (v *view) at(p string) (viewMount, string) {
	for i := len(v.mounts) - 1; i >= 0; i-- {
		if rel, ok := under(p, v.mounts[i].target); ok {
			return v.mounts[i], rel
		}
	}
	return viewMount{target: "/", kind: kindEmpty}, p[1:]
}

// open opens p of the view without following any symbolic link (one
// at p itself is opened as such), O_PATH. ok is false when p is not
// there.
func (v *view) open(p string) (fd int, m viewMount, ok bool, err error) {
	m, rel := v.at(p)
	switch m.kind {
	case kindEmpty:
		return -1, m, false, nil
	case kindJob:
		if rel != "." {
			return -1, m, false, fmt.Errorf("%w (mount %q)", errThroughJob, m.job)
		}
	}
	if rel == "." {
		fd, err = unix.Open(m.host, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return fd, m, err == nil, err
	}
	dir, err := unix.Open(m.host, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, m, false, err
	}
	defer unix.Close(dir)
	fd, err = unix.Openat2(dir, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	switch {
	case err == nil:
		return fd, m, true, nil
	case errors.Is(err, unix.ENOENT):
		return -1, m, false, nil
	case errors.Is(err, unix.ELOOP):
		return -1, m, false, fmt.Errorf("%s: %w", p, errChanged)
	case errors.Is(err, unix.EXDEV):
		return -1, m, false, fmt.Errorf("%s: %w", p, errHostMount)
	}
	return -1, m, false, fmt.Errorf("%s: %w", p, err)
}

// lstat is open and fstat.
func (v *view) lstat(p string) (st unix.Stat_t, m viewMount, ok bool, err error) {
	fd, m, ok, err := v.open(p)
	if !ok || err != nil {
		return st, m, false, err
	}
	defer unix.Close(fd)
	return st, m, true, unix.Fstat(fd, &st)
}

// readlink reads the symbolic link at p.
func (v *view) readlink(p string) (string, error) {
	fd, _, ok, err := v.open(p)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%s: %w", p, errChanged)
	}
	defer unix.Close(fd)
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return string(buf[:n]), nil
}

// step is an entry a resolution looked up and found: its path (with no
// symbolic link before its last name), its type and, for a link, what
// it says.
type step struct {
	p    string
	mode uint32
	link string
}

// resolve resolves target in the view as runc does: each symbolic link
// is followed inside the container's root (an absolute one from the
// root, ".." stops at it), and what is missing is taken as named. The
// result is clean and has no symbolic link in it. each, when set, is
// called with every path the walk reaches, and its error ends it;
// strict: a name in a host directory counts only from a directory no
// one but root may write.
func (v *view) resolve(target string, strict bool, each func(string) error) (string, error) {
	p, _, err := v.walk(target, strict, each)
	return p, err
}

// walk is resolve, and what it found on the way, in order.
func (v *view) walk(target string, strict bool, each func(string) error) (string, []step, error) {
	var trail []step
	todo := strings.Split(target, "/")
	cur, links := "/", 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		if each != nil {
			if err := each(next); err != nil {
				return "", nil, err
			}
		}
		st, m, ok, err := v.lstat(next)
		if err != nil {
			return "", nil, err
		}
		if strict && m.kind == kindHost {
			if err := v.rootsOnly(cur, next, m, st, ok); err != nil {
				return "", nil, err
			}
		}
		if !ok {
			cur = next
			continue
		}
		s := step{p: next, mode: st.Mode & unix.S_IFMT}
		if s.mode == unix.S_IFLNK {
			if links++; links > maxLinks {
				return "", nil, fmt.Errorf("%s: %w", target, unix.ELOOP)
			}
			if s.link, err = v.readlink(next); err != nil {
				return "", nil, err
			}
			trail = append(trail, s)
			if path.IsAbs(s.link) {
				cur = "/"
			}
			todo = append(strings.Split(s.link, "/"), todo...)
			continue
		}
		trail = append(trail, s)
		cur = next
	}
	return cur, trail, nil
}

// settle resolves target (walk), then fixes in the image's overlay what
// the resolution found and where it ends (pinTrail, pin): runc, which
// resolves it again (or mounts at the result), finds the same.
func (v *view) settle(target string, file, strict bool, each func(string) error) (string, error) {
	p, trail, err := v.walk(target, strict, each)
	if err != nil {
		return "", err
	}
	if err := v.pinTrail(trail); err != nil {
		return "", err
	}
	return p, v.pin(p, file)
}

// pinTrail copies each entry of trail that lies in the image's overlay
// up into its upper layer (root's), in order, after checking it is
// still what the resolution found (its type; for a link, what it says).
func (v *view) pinTrail(trail []step) error {
	for _, s := range trail {
		fd, m, ok, err := v.open(s.p)
		if err != nil {
			return err
		}
		if m.kind != kindOverlay || s.mode != unix.S_IFDIR && s.mode != unix.S_IFLNK {
			if ok {
				unix.Close(fd)
			}
			continue // a file's name is pin's to fix, where it ends
		}
		if !ok {
			return fmt.Errorf("%s: %w", s.p, errChanged)
		}
		err = pinStep(fd, s)
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

// pinStep copies up the overlay's entry at fd, found as s.
func pinStep(fd int, s step) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: %w", s.p, err)
	}
	if st.Mode&unix.S_IFMT != s.mode {
		return fmt.Errorf("%s: %w", s.p, errChanged)
	}
	if err := unix.Fchownat(fd, "", int(st.Uid), int(st.Gid), unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s: copying up: %w", s.p, err)
	}
	if s.mode != unix.S_IFLNK {
		return nil
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return fmt.Errorf("%s: %w", s.p, err)
	}
	if string(buf[:n]) != s.link {
		return fmt.Errorf("%s: %w", s.p, errChanged)
	}
	return nil
}

// rootsOnly refuses name next, looked up in dir of host mount m, where
// someone other than root could change what it names: dir must be
// root's and not writable by group or others, unless it is sticky (as
// /var/tmp) and next exists and is root's.
func (v *view) rootsOnly(dir, next string, m viewMount, st unix.Stat_t, ok bool) error {
	if _, in := under(dir, m.target); !in || next == m.target {
		return nil // the mountpoint itself: made by runc
	}
	dst, _, dok, err := v.lstat(dir)
	if err != nil || !dok {
		return fmt.Errorf("%s: %w", dir, errChanged)
	}
	if dst.Uid == 0 && dst.Mode&0o022 == 0 {
		return nil
	}
	if dst.Mode&unix.S_ISVTX != 0 && ok && st.Uid == 0 {
		return nil
	}
	return fmt.Errorf("leads through %s, a directory others than root may write", dir)
}

// pin makes resolved path p (a file when file is set, else a
// directory) fixed in the image's overlay: each directory on the way
// that lies in the overlay is copied up into the overlay's upper layer
// (root's, which no job reaches) by a chown to its own owner, what is
// missing is made there, as runc would, and a file at p that is not the
// node's layer's is replaced there by an empty one (a mount covers it:
// its content does not matter, its name does). A symbolic link found on
// the way (the image changed since the walk) is an error.
func (v *view) pin(p string, file bool) error {
	if p == "/" {
		return nil
	}
	parts := strings.Split(p, "/")[1:]
	for i := range parts {
		q := "/" + strings.Join(parts[:i+1], "/")
		last := i == len(parts)-1
		fd, m, ok, err := v.open(q)
		if err != nil {
			return err
		}
		if m.kind != kindOverlay {
			if ok {
				unix.Close(fd)
			}
			continue
		}
		if !ok {
			if err := v.make(q, last && file, false); err != nil {
				return err
			}
			continue
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		switch {
		case err != nil:
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			err = pinStep(fd, step{p: q, mode: unix.S_IFDIR})
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			err = errChanged
		case !last:
			err = unix.ENOTDIR
		case !v.inLayer(q):
			err = v.make(q, true, true)
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// inLayer says whether the node's layer has q (its overlay shows the
// layer's before the image's).
func (v *view) inLayer(q string) bool {
	if v.layer == "" {
		return false
	}
	_, err := os.Lstat(v.layer + q)
	return err == nil
}

// make makes q in the image's overlay, a directory or an empty file
// (file), where nothing was; replace: in place of what is there. An
// entry that appeared meanwhile is errChanged.
func (v *view) make(q string, file, replace bool) error {
	dir, _, ok, err := v.open(path.Dir(q))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: %w", q, errChanged)
	}
	defer unix.Close(dir)
	name := path.Base(q)
	if replace {
		if err := unix.Unlinkat(dir, name, 0); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	if file {
		var fd int
		if fd, err = unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644); err == nil {
			err = unix.Close(fd)
		}
	} else {
		err = unix.Mkdirat(dir, name, 0o755)
	}
	if errors.Is(err, unix.EEXIST) {
		err = errChanged
	}
	if err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}
