package asuser

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// become gives the calling thread, which must be locked to its
// goroutine for good, c's file-system credentials: the supplementary
// groups, the fsgid, the fsuid, and no capability at all (permitted and
// effective), so that no capability overrides a permission check
// (CAP_DAC_OVERRIDE and the like, CAP_SYS_RESOURCE's quotas). Each call
// here is the raw system call, which changes this thread only. The
// real, effective and saved ids stay root's (see the package doc).
func become(c Cred) error {
	if err := unix.Setgroups(c.Groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if _, err := unix.SetfsgidRetGid(c.GID); err != nil {
		return fmt.Errorf("setfsgid: %w", err)
	}
	if _, err := unix.SetfsuidRetUid(c.UID); err != nil {
		return fmt.Errorf("setfsuid: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	// Check, rather than trust: setfsuid(-1) changes nothing and
	// answers the current fsuid.
	fsuid, _ := unix.SetfsuidRetUid(-1)
	fsgid, _ := unix.SetfsgidRetGid(-1)
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if fsuid != c.UID || fsgid != c.GID || caps != none {
		return errors.New("credentials did not change")
	}
	return nil
}

// resolve: no symlink on any component, no magic link, no crossing into
// /proc's fd links.
const resolve = unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openOne answers one request with an fd (-1 with an error).
func openOne(c Cred, r Request) (int, error) {
	switch r.Kind {
	case Output:
		return openOutput(r.Path)
	case Source:
		return openSource(r.Path)
	case Image:
		return openImage(c, r.Path)
	case Read:
		return openRead(r.Dir, r.Path)
	}
	return -1, fmt.Errorf("unknown request kind %q", r.Kind)
}

// openat2 opens path; a relative one from "/" (the directory the
// nodelet's own working directory may not be).
func openat2(path string, flags uint64, mode uint64) (int, error) {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Mode: mode, Resolve: resolve})
		if err == unix.EINTR || err == unix.EAGAIN {
			continue // EAGAIN: a rename raced the lookup
		}
		return fd, err
	}
}

// openOutput: O_NONBLOCK so that a FIFO answers ENXIO instead of hanging;
// cleared again on the regular file it must be. A directory on the way
// that does not exist is created, with the user's credentials (as LSF
// creates an output file's directory, bsub -o logs/%J.out), each
// component through no symbolic link.
func openOutput(path string) (int, error) {
	const flags = unix.O_WRONLY | unix.O_APPEND | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_NONBLOCK
	fd, err := openat2(path, flags, 0o600)
	if errors.Is(err, unix.ENOENT) {
		if err = mkdirAll(filepath.Dir(path)); err == nil {
			fd, err = openat2(path, flags, 0o600)
		}
	}
	if err != nil {
		return -1, err
	}
	return regular(fd, unix.O_WRONLY|unix.O_APPEND)
}

// outputDirMode is the mode of a directory created for an output file,
// less the nodelet's umask: the user's, as mkdir makes one.
const outputDirMode = 0o755

// mkdirAll makes dir and every missing directory above it, each with
// mkdirat in its parent, opened O_PATH through no symbolic link: with
// the thread's (the user's) credentials, so where the user may not
// write nothing is made, and a symlink on the way is refused (ELOOP).
func mkdirAll(dir string) error {
	cur, err := openat2("/", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer func() { unix.Close(cur) }()
	for name := range strings.SplitSeq(strings.Trim(dir, "/"), "/") {
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			return fmt.Errorf("%s: %w", dir, unix.EINVAL) // output paths come cleaned
		}
		next, err := openat2At(cur, name, unix.O_PATH|unix.O_DIRECTORY)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(cur, name, outputDirMode); err != nil && !errors.Is(err, unix.EEXIST) {
				return err
			}
			next, err = openat2At(cur, name, unix.O_PATH|unix.O_DIRECTORY)
		}
		if err != nil {
			return err
		}
		unix.Close(cur)
		cur = next
	}
	return nil
}

// openat2At opens name in the directory dirfd, through no symbolic link.
func openat2At(dirfd int, name string, flags uint64) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: resolve})
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		return fd, err
	}
}

// openSource opens O_PATH (search permission on every directory on the
// way, no open of a FIFO or device), then asks the kernel whether the user
// may read what it found, through the fd: no second lookup by name.
func openSource(path string) (int, error) {
	fd, err := openat2(path, unix.O_PATH, 0) // not O_NOFOLLOW: that would open a trailing symlink itself
	if err != nil {
		return -1, err
	}
	// AT_EACCESS: with this thread's fsuid, fsgid and groups (and no
	// capability), not the real uid (root's) that access(2) would use.
	if err := unix.Faccessat2(fd, "", unix.R_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openImage opens for reading; a directory must be the user's own (a
// rootfs runs as the container's /, so it is the user's to give).
func openImage(c Cred, path string) (int, error) {
	fd, err := openat2(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		if c.UID != 0 && int(st.Uid) != c.UID {
			unix.Close(fd)
			return -1, ErrNotOwner
		}
	default:
		unix.Close(fd)
		return -1, ErrNotRegular
	}
	return fd, nil
}

// openRead opens path beneath dir: RESOLVE_BENEATH keeps ".." and
// absolute paths inside it, and the user's search permission is checked
// on dir and every directory below it on the way.
func openRead(dir *os.File, path string) (int, error) {
	if dir == nil {
		return -1, errors.New("read request without a directory")
	}
	var fd int
	var err error
	for {
		fd, err = unix.Openat2(int(dir.Fd()), path, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC,
			Resolve: resolve | unix.RESOLVE_BENEATH,
		})
		if err != unix.EINTR && err != unix.EAGAIN {
			break
		}
	}
	if err != nil {
		return -1, err
	}
	return regular(fd, unix.O_RDONLY)
}

// regular keeps fd only if it is a regular file, and sets its status
// flags to flags; otherwise (a device, a FIFO, a directory…) it closes
// it and says why.
func regular(fd, flags int) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, ErrNotRegular
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
