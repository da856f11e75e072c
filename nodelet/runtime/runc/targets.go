package runc

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// A job's mount target is a path in the container, and runc follows the
// symbolic links it meets there inside the container's root (as
// github.com/cyphar/filepath-securejoin does): a link /x -> /.troupe/bin
// in an image the user owns turns a target /x/troupe-init into
// /.troupe/bin/troupe-init. jobTargets resolves each job target the same
// way, in the tree runc will have built when it makes that mount (the
// image's overlay, the host's directories, /tmp, the home, the mounts
// before it), refuses one that lands on or under a reserved path (each
// resolved there too), and gives runc the resolved path, with nothing
// on the way a user can change before runc mounts:
//
//   - in the image's overlay, every directory on the way (and the
//     target itself, when it exists) is copied up into the overlay's
//     upper layer, root's, and a missing one is made there: the image's
//     owner may change the image directory meanwhile, and the overlay
//     would show it;
//   - in the host's directories (the host image) each name is taken only
//     from a directory no one but root may write;
//   - a job's mount source is its user's to change at any time: no
//     other target may lead through one.

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
type view struct{ mounts []viewMount }

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

// resolve resolves target in the view as runc does: each symbolic link
// is followed inside the container's root (an absolute one from the
// root, ".." stops at it), and what is missing is taken as named. The
// result is clean and has no symbolic link in it. each, when set, is
// called with every path the walk reaches, and its error ends it;
// strict: a name in a host directory counts only from a directory no
// one but root may write.
func (v *view) resolve(target string, strict bool, each func(string) error) (string, error) {
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
				return "", err
			}
		}
		st, m, ok, err := v.lstat(next)
		if err != nil {
			return "", err
		}
		if strict && m.kind == kindHost {
			if err := v.rootsOnly(cur, next, m, st, ok); err != nil {
				return "", err
			}
		}
		if ok && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if links++; links > maxLinks {
				return "", fmt.Errorf("%s: %w", target, unix.ELOOP)
			}
			link, err := v.readlink(next)
			if err != nil {
				return "", err
			}
			if path.IsAbs(link) {
				cur = "/"
			}
			todo = append(strings.Split(link, "/"), todo...)
			continue
		}
		cur = next
	}
	return cur, nil
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

// pin makes resolved path p, a job's target (a file when file is set,
// else a directory), fixed in the image's overlay: each directory on
// the way that lies in the overlay, and p itself, is copied up into the
// overlay's upper layer (root's, which no job reaches) by a chown to
// its own owner, and what is missing is made there, as runc would. A
// symbolic link found on the way (the image changed since resolve) is
// an error.
func (v *view) pin(p string, file bool) error {
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
			if err := v.make(q, m, last && file); err != nil {
				return err
			}
			continue
		}
		err = copyUp(fd, q, last)
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

// copyUp copies the overlay's file at fd (q in the container) up into
// its upper layer; only the last may be other than a directory.
func copyUp(fd int, q string, last bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return fmt.Errorf("%s: %w", q, errChanged)
	case unix.S_IFDIR:
	default:
		if !last {
			return fmt.Errorf("%s: %w", q, unix.ENOTDIR)
		}
	}
	if err := unix.Fchownat(fd, "", int(st.Uid), int(st.Gid), unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s: copying up: %w", q, err)
	}
	return nil
}

// make makes the missing q, in the overlay mount m: a directory, or an
// empty file (file). An entry that appeared meanwhile is errChanged.
func (v *view) make(q string, m viewMount, file bool) error {
	dir, _, ok, err := v.open(path.Dir(q))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: %w", q, errChanged)
	}
	defer unix.Close(dir)
	name := path.Base(q)
	if file {
		fd, err := unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err == nil {
			return unix.Close(fd)
		}
		err = fmt.Errorf("%s: %w", q, err)
		if errors.Is(err, unix.EEXIST) {
			err = fmt.Errorf("%s: %w", q, errChanged)
		}
		return err
	}
	if err := unix.Mkdirat(dir, name, 0o755); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%s: %w", q, errChanged)
		}
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

// containerView is the tree runc builds for s before its first
// Spec.Mounts entry: root (an image's overlay, else the host image's
// skeleton with hostDirs), /tmp, the home and, unless layered,
// troupe-init.
func containerView(s runtime.Spec, l layout, root string, hostDirs []string, layered bool) *view {
	v := &view{}
	if s.ImageOrHost() != runtime.ImageHost {
		v.add(viewMount{target: "/", host: root, kind: kindOverlay})
	} else {
		v.add(viewMount{target: "/", host: root, kind: kindNode})
		for _, d := range hostDirs {
			v.add(viewMount{target: d, host: d, kind: kindHost})
		}
	}
	v.add(viewMount{target: "/tmp", kind: kindEmpty})
	v.add(viewMount{target: runtime.HomeDir, host: l.home(), kind: kindNode})
	if !layered || !s.InitLayered {
		v.addNode(runtime.InitPath, s.Init)
	}
	return v
}

func (v *view) add(m viewMount) { v.mounts = append(v.mounts, m) }

// addNode adds a node's mount of host at target, where runc puts it.
func (v *view) addNode(target, host string) {
	if r, err := v.resolve(target, false, nil); err == nil {
		target = r
	}
	v.add(viewMount{target: target, host: host, kind: kindNode})
}

// jobTargets returns s.Mounts with each job's target (runtime.Mount.Job)
// resolved in the container's tree and pinned there (see above), or an
// error wrapping runtime.ErrMountTarget naming the mount; root, hostDirs
// and layered are ociSpec's.
func jobTargets(s runtime.Spec, l layout, root string, hostDirs []string, layered bool) ([]runtime.Mount, error) {
	if !slices.ContainsFunc(s.Mounts, func(m runtime.Mount) bool { return m.Job != "" }) {
		return s.Mounts, nil
	}
	v := containerView(s, l, root, hostDirs, layered)
	out := slices.Clone(s.Mounts)
	var reserved, inits []string
	for i, m := range out {
		if m.Job == "" {
			if !layered || !m.Layered {
				v.addNode(m.Target, m.Source)
			}
			continue
		}
		if reserved == nil {
			reserved, inits = reservedIn(v), initsIn(v)
		}
		refuse := func(err error) error {
			return fmt.Errorf("mount %q: %w: target %s %w", m.Job, runtime.ErrMountTarget, m.Target, err)
		}
		// On the way, only the kernel's file systems end the walk (the
		// view does not show what is in them); the end is checked
		// against every reserved path.
		kernel := func(p string) error {
			if r, ok := runtime.ReservedBy(p, kernelTargets); ok {
				return fmt.Errorf("leads into %s in the container (its symbolic links followed), which is reserved", r)
			}
			return nil
		}
		p, err := v.resolve(path.Clean(m.Target), true, kernel)
		if err != nil {
			return nil, refuse(err)
		}
		if r, ok := runtime.ReservedBy(p, reserved); ok {
			how := "which is reserved"
			if !slices.Contains(runtime.ReservedTargets, r) {
				how = "where a reserved path leads, which is reserved"
			}
			return nil, refuse(fmt.Errorf("leads to %s in the container (its symbolic links followed), on or under %s, %s", p, r, how))
		}
		for _, r := range inits {
			if _, above := under(r, p); above {
				return nil, refuse(fmt.Errorf("leads to %s in the container (its symbolic links followed), which holds %s, where the image's links put troupe's own files", p, r))
			}
		}
		fi, err := os.Stat(m.Source)
		if err != nil {
			return nil, fmt.Errorf("mount %q: source: %w", m.Job, err)
		}
		if err := v.pin(p, !fi.IsDir()); err != nil {
			return nil, refuse(err)
		}
		out[i].Target = p
		v.add(viewMount{target: p, host: m.Source, kind: kindJob, job: m.Job})
	}
	return out, nil
}

// initsIn is where /.troupe and troupe-init lead in v: no job may mount
// on them, under them or above them (above /.troupe itself is only "/",
// but an image without the layer may lead them elsewhere, under a
// directory a job could cover after runc mounted troupe-init there).
func initsIn(v *view) []string {
	var out []string
	for _, r := range []string{path.Dir(path.Dir(runtime.InitPath)), runtime.InitPath} {
		if p, err := v.resolve(r, false, nil); err == nil && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// kernelTargets are the reserved paths of the kernel's file systems.
var kernelTargets = []string{"/proc", "/sys", "/dev"}

// reservedIn is runtime.ReservedTargets and where each leads in v.
func reservedIn(v *view) []string {
	out := slices.Clone(runtime.ReservedTargets)
	for _, r := range runtime.ReservedTargets {
		if p, err := v.resolve(r, false, nil); err == nil && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
