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
// before it), and refuses one that lands on or under a reserved path,
// each resolved there too, or on or above where /.troupe and
// troupe-init lead (an image without the node's layer may lead them
// elsewhere; runc mounts troupe-init there before the job's mounts). It
// gives runc the resolved path, and leaves nothing on the way a user
// can change before runc mounts:
//
//   - in the image's overlay, what each resolution found (directories
//     and links; also for what runc resolves again: /tmp, the home, the
//     node's own targets, /.troupe and troupe-init) is copied up into
//     the overlay's upper layer, root's, which the overlay shows before
//     the image; what is missing is made there, and a file a mount
//     covers is replaced there by an empty one: the image's owner may
//     change the image directory at any time, and the overlay would
//     show it;
//   - in the host's directories (the host image) each name is taken only
//     from a directory no one but root may write, or from a sticky one
//     where the entry is root's;
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

// containerView is the tree runc builds for s before its first
// Spec.Mounts entry: root (an image's overlay, else the host image's
// skeleton with hostDirs), /tmp, the home and, unless layered,
// troupe-init, each where the image leads it.
func containerView(s runtime.Spec, l layout, root string, hostDirs []string, layered bool) (*view, error) {
	v := &view{}
	if s.ImageOrHost() != runtime.ImageHost {
		v.add(viewMount{target: "/", host: root, kind: kindOverlay})
		if layered {
			v.layer = s.Layer
		}
	} else {
		v.add(viewMount{target: "/", host: root, kind: kindNode})
		for _, d := range hostDirs {
			v.add(viewMount{target: d, host: d, kind: kindHost})
		}
	}
	// runc mounts /tmp and the home where the image leads them, too.
	tmp, err := v.settle("/tmp", false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("/tmp: %w", err)
	}
	v.add(viewMount{target: tmp, kind: kindEmpty})
	if err := v.addNode(runtime.HomeDir, l.home()); err != nil {
		return nil, err
	}
	if !layered || !s.InitLayered {
		if err := v.addNode(runtime.InitPath, s.Init); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (v *view) add(m viewMount) { v.mounts = append(v.mounts, m) }

// addNode adds a node's mount of host at target, where runc puts it,
// settled there (see settle).
func (v *view) addNode(target, host string) error {
	fi, err := os.Stat(host)
	if err != nil {
		return err
	}
	p, err := v.settle(target, !fi.IsDir(), false, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	v.add(viewMount{target: p, host: host, kind: kindNode})
	return nil
}

// jobTargets returns s.Mounts with each job's target (runtime.Mount.Job)
// resolved in the container's tree and pinned there (see above), or an
// error wrapping runtime.ErrMountTarget naming the mount; root, hostDirs
// and layered are ociSpec's.
func jobTargets(s runtime.Spec, l layout, root string, hostDirs []string, layered bool) ([]runtime.Mount, error) {
	if !slices.ContainsFunc(s.Mounts, func(m runtime.Mount) bool { return m.Job != "" }) {
		return s.Mounts, nil
	}
	v, err := containerView(s, l, root, hostDirs, layered)
	if err != nil {
		return nil, fmt.Errorf("%w: the node's mounts: %w", runtime.ErrMountTarget, err)
	}
	out := slices.Clone(s.Mounts)
	var reserved, inits []string
	for i, m := range out {
		if m.Job == "" {
			if !layered || !m.Layered {
				if err := v.addNode(m.Target, m.Source); err != nil {
					return nil, fmt.Errorf("%w: the node's mounts: %w", runtime.ErrMountTarget, err)
				}
			}
			continue
		}
		if reserved == nil {
			if reserved, err = reservedIn(v); err == nil {
				inits, err = initsIn(v)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: reserved paths: %w", runtime.ErrMountTarget, err)
			}
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
		p, trail, err := v.walk(path.Clean(m.Target), true, kernel)
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
		if err := v.pinTrail(trail); err != nil {
			return nil, refuse(err)
		}
		if err := v.pin(p, !fi.IsDir()); err != nil {
			return nil, refuse(err)
		}
		out[i].Target = p
		v.add(viewMount{target: p, host: m.Source, kind: kindJob, job: m.Job})
	}
	return out, nil
}

// kernelTargets are the reserved paths of the kernel's file systems.
var kernelTargets = []string{"/proc", "/sys", "/dev"}

// reservedIn is runtime.ReservedTargets and where each leads in v. They
// need not be settled: the node's own targets are (addNode), and so are
// /.troupe and troupe-init (initsIn); were the image to lead /proc,
// /sys or /dev elsewhere after this, a job's mount would land in the
// container's own view only (runc refuses proc and sysfs on a link).
func reservedIn(v *view) ([]string, error) {
	out := slices.Clone(runtime.ReservedTargets)
	for _, r := range runtime.ReservedTargets {
		p, err := v.resolve(r, false, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// initsIn is where /.troupe and troupe-init lead in v, settled there
// (runc resolves InitPath again to exec it): no job may mount on them,
// under them or above them (above /.troupe itself is only "/", but an
// image without the layer may lead them elsewhere, under a directory a
// job could cover after runc mounted troupe-init there).
func initsIn(v *view) ([]string, error) {
	var out []string
	for _, r := range []string{path.Dir(path.Dir(runtime.InitPath)), runtime.InitPath} {
		p, err := v.settle(r, r == runtime.InitPath, false, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}
