// Package asuser opens paths a job names with the job's user's
// credentials, so that the root nodelet never creates, reads or mounts
// anything the same user could not on the host.
//
// Open runs on an OS thread of its own that takes the user's file-system
// credentials before it touches any path: the supplementary groups, the
// fsgid and the fsuid (looked up as a login would: os/user, so NSS with
// cgo), then drops every capability. Linux keeps credentials per thread
// (only the C library and Go's syscall.Setuid apply them to every
// thread), so the rest of the nodelet keeps root's. The thread opens
// each path with openat2(RESOLVE_NO_SYMLINKS), and the kernel answers
// every permission question exactly as it would for that user in a
// shell: search permission on every directory, write permission where a
// file is created (owned by the fsuid and fsgid), ACLs, supplementary
// groups, root-squashed NFS (which sends the fsuid).
//
// The thread is never given back: its goroutine ends locked to it, and
// Go then ends the thread, so no other goroutine ever runs with the
// user's credentials. Its real, effective and saved uids stay root's:
// the user cannot signal or trace it (which would reach the whole
// nodelet) as the user could a thread whose uids were the user's. The
// fsuid change makes the nodelet undumpable (the kernel's rule for any
// credential change), as a root daemon without core dumps.
//
// It imports no troupe package.
package asuser

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrSymlink: a component of the path is a symbolic link; troupe follows
// none in paths it opens for a job.
var ErrSymlink = errors.New("a component of the path is a symbolic link (troupe follows none: give the real path)")

// ErrNotRegular: an output file that exists is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrNotOwner: a rootfs directory given by path does not belong to the
// job's user.
var ErrNotOwner = errors.New("not owned by the job's user")

// Kind is what to do with one path.
type Kind string

// Kinds of requests.
const (
	// Output opens a job's output or error file for appending, creating
	// it (mode 0600, owned by the user) when missing. An existing file
	// must be a regular file the user may write.
	Output Kind = "output"
	// Source opens a mount source as an O_PATH file, once the user may
	// search every directory on the way and read the source itself.
	Source Kind = "source"
	// Image opens an image given by path for reading: a regular file the
	// user may read, or a directory the user owns and may read.
	Image Kind = "image"
	// Read opens a file inside an image directory the user gave (an OCI
	// layout's index.json and blobs) for reading: Path is relative to
	// Request.Dir and resolved beneath it, through no symbolic link; it
	// must be a regular file the user may read.
	Read Kind = "read"
)

// Cred is whose credentials Open takes.
type Cred struct {
	UID    int   `json:"uid"`
	GID    int   `json:"gid"`
	Groups []int `json:"groups"` // supplementary groups
}

// Lookup returns uid's credentials as a login gives them: gid and the
// supplementary groups of uid's user in the group database (with gid
// among them). A uid with no user entry gets gid alone.
func Lookup(uid, gid int) Cred {
	c := Cred{UID: uid, GID: gid, Groups: []int{gid}}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return c
	}
	ids, err := u.GroupIds()
	if err != nil {
		return c
	}
	for _, s := range ids {
		if g, err := strconv.Atoi(s); err == nil && g != gid {
			c.Groups = append(c.Groups, g)
		}
	}
	return c
}

// Request is one path to open.
type Request struct {
	Kind Kind   `json:"kind"`
	Path string `json:"path"`
	// Dir is the directory a Read's Path is relative to (an O_PATH file
	// will do): the thread looks up Path from it with the user's search
	// permission on every directory on the way.
	Dir *os.File `json:"-"`
}

// Result is the answer to one Request: File, or Err (its errno kept, so
// errors.Is(err, fs.ErrNotExist) and the like hold).
type Result struct {
	File *os.File
	Err  error
}

// timeout bounds one Open (a hung NFS mount must not hang a job's start
// forever).
const timeout = 30 * time.Second

// Open opens every request with c's credentials, on one thread that
// takes them and ends after. The error is for the thread itself (its
// credentials could not be taken); each path's own refusal is in its
// Result. The caller closes the files.
func Open(c Cred, reqs []Request) ([]Result, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	type answer struct {
		res []Result
		err error
	}
	var (
		mu        sync.Mutex
		abandoned bool
	)
	done := make(chan answer, 1)
	go func() {
		res, err := openOnOwnThread(c, reqs)
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			closeAll(res)
			return
		}
		done <- answer{res, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a := <-done:
		return a.res, a.err
	case <-timer.C:
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case a := <-done:
		return a.res, a.err
	default:
	}
	abandoned = true // its files are closed when it ends
	return nil, fmt.Errorf("as user: no answer in %v (a hung file system?)", timeout)
}

// openOnOwnThread locks its goroutine to a thread that is not the
// process's main thread (whose credentials the kernel shows as the
// process's own), takes c's credentials there and opens reqs. It never
// unlocks: the thread ends with the goroutine.
func openOnOwnThread(c Cred, reqs []Request) ([]Result, error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread: hold it (so that the goroutine below runs
		// elsewhere) and give it back untouched.
		defer runtime.UnlockOSThread()
		type answer struct {
			res []Result
			err error
		}
		done := make(chan answer)
		go func() {
			runtime.LockOSThread()
			res, err := openAs(c, reqs)
			done <- answer{res, err}
		}()
		a := <-done
		return a.res, a.err
	}
	return openAs(c, reqs)
}

// openAs takes c's credentials on this thread (locked to the calling
// goroutine, for good) and opens reqs.
func openAs(c Cred, reqs []Request) ([]Result, error) {
	if err := become(c); err != nil {
		return nil, fmt.Errorf("as user: %w", err)
	}
	out := make([]Result, 0, len(reqs))
	for _, r := range reqs {
		fd, err := openOne(c, r)
		if err != nil {
			out = append(out, Result{Err: err})
			continue
		}
		out = append(out, Result{File: os.NewFile(uintptr(fd), r.Path)})
	}
	return out, nil
}

// Opener is OpenIn with c's credentials: the image.OpenFunc for an
// image a job named by path.
func Opener(c Cred) func(dir *os.File, name string) (*os.File, error) {
	return func(dir *os.File, name string) (*os.File, error) { return OpenIn(c, dir, name) }
}

// OpenIn opens name, relative to dir and beneath it, for reading with
// c's credentials (a Read request).
func OpenIn(c Cred, dir *os.File, name string) (*os.File, error) {
	res, err := Open(c, []Request{{Kind: Read, Path: name, Dir: dir}})
	if err != nil {
		return nil, err
	}
	if res[0].Err != nil {
		return nil, &os.PathError{Op: "open as user", Path: name, Err: Describe(res[0].Err)}
	}
	return res[0].File, nil
}

func closeAll(res []Result) {
	for _, r := range res {
		if r.File != nil {
			r.File.Close()
		}
	}
}

// Describe words a Result's error for a message: the symlink refusal for
// ELOOP (what RESOLVE_NO_SYMLINKS answers), the kernel's age for ENOSYS,
// else the error itself.
func Describe(err error) error {
	switch {
	case errors.Is(err, syscall.ELOOP):
		return ErrSymlink
	case errors.Is(err, syscall.ENOSYS):
		return fmt.Errorf("%w (openat2 needs Linux 5.6 or later)", err)
	}
	return err
}
