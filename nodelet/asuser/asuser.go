// Package asuser opens paths a job names with the job's user's
// credentials, so that the root nodelet never creates, reads or mounts
// anything the same user could not on the host.
//
// Open starts a short-lived helper: the running binary again
// (/proc/self/exe), which drops to the user's uid, gid and supplementary
// groups (looked up as a login would: os/user, so NSS with cgo) before it
// touches any path, opens each path with openat2(RESOLVE_NO_SYMLINKS) and
// hands the open files back over a socketpair (SCM_RIGHTS). The kernel
// answers every permission question exactly as it would for that user in
// a shell: search permission on every directory, write permission where a
// file is created, ACLs, supplementary groups, root-squashed NFS.
//
//	nodelet (root) ──stdin: request (uid, gid, groups, paths)──► helper
//	        ▲                                                 setgroups/setgid/setuid
//	        └──── socketpair: one message per path: error or fd ◄┘
//
// The helper mode starts from this package's init when the environment
// names it, so every binary that links the package (the nodelet, its
// tests) can serve as its own helper.
//
// It imports no troupe package.
package asuser

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strconv"
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
)

// Cred is whose credentials the helper takes.
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
}

// Result is the answer to one Request: File, or Err (its errno kept, so
// errors.Is(err, fs.ErrNotExist) and the like hold).
type Result struct {
	File *os.File
	Err  error
}

// helperEnv names the helper mode in the helper's environment.
const helperEnv = "TROUPE_ASUSER_HELPER"

// timeout bounds one helper run (a hung NFS mount must not hang a job's
// start forever).
const timeout = 30 * time.Second

type request struct {
	Cred Cred      `json:"cred"`
	Reqs []Request `json:"reqs"`
}

type answer struct {
	Errno int    `json:"errno,omitempty"`
	Err   string `json:"err,omitempty"`
}

// Open opens every request with c's credentials, in one helper run. The
// error is for the helper itself; each path's own refusal is in its
// Result. The caller closes the files.
func Open(c Cred, reqs []Request) ([]Result, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("as user: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "asuser"), os.NewFile(uintptr(fds[1]), "asuser-helper")
	defer mine.Close()
	conn, err := net.FileConn(mine)
	if err != nil {
		theirs.Close()
		return nil, fmt.Errorf("as user: %w", err)
	}
	defer conn.Close()
	body, err := json.Marshal(request{Cred: c, Reqs: reqs})
	if err != nil {
		theirs.Close()
		return nil, err
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"troupe-asuser"}
	cmd.Env = []string{helperEnv + "=1", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdin = bytesReader(body)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Dir = "/"
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		return nil, fmt.Errorf("as user: starting helper: %w", err)
	}
	results, rerr := receive(conn.(*net.UnixConn), len(reqs))
	if werr := cmd.Wait(); werr != nil && rerr == nil {
		rerr = fmt.Errorf("as user: helper: %w: %s", werr, stderr.String())
	}
	if rerr != nil {
		for _, r := range results {
			if r.File != nil {
				r.File.Close()
			}
		}
		if _, ok := rerr.(net.Error); ok || stderr.Len() > 0 {
			rerr = fmt.Errorf("%w: %s", rerr, stderr.String())
		}
		return nil, rerr
	}
	return results, nil
}

func receive(conn *net.UnixConn, n int) ([]Result, error) {
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	var out []Result
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	for range n {
		m, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil {
			return out, fmt.Errorf("as user: reading the helper's answer: %w", err)
		}
		if m == 0 {
			return out, errors.New("as user: the helper ended before answering")
		}
		var a answer
		if err := json.Unmarshal(buf[:m], &a); err != nil {
			return out, fmt.Errorf("as user: bad answer from helper: %w", err)
		}
		var f *os.File
		if oobn > 0 {
			cms, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil || len(cms) != 1 {
				return out, errors.New("as user: bad control message from helper")
			}
			fds, err := unix.ParseUnixRights(&cms[0])
			if err != nil || len(fds) != 1 {
				return out, errors.New("as user: bad file from helper")
			}
			unix.CloseOnExec(fds[0])
			f = os.NewFile(uintptr(fds[0]), "")
		}
		switch {
		case a.Errno != 0:
			out = append(out, Result{File: f, Err: syscall.Errno(a.Errno)})
		case a.Err != "":
			out = append(out, Result{File: f, Err: errorFrom(a.Err)})
		case f == nil:
			return out, errors.New("as user: helper sent neither file nor error")
		default:
			out = append(out, Result{File: f})
		}
		if out[len(out)-1].Err != nil && f != nil {
			f.Close()
			out[len(out)-1].File = nil
		}
	}
	return out, nil
}

// errorFrom turns a helper's refusal back into its sentinel.
func errorFrom(s string) error {
	for _, e := range []error{ErrSymlink, ErrNotRegular, ErrNotOwner} {
		if s == e.Error() {
			return e
		}
	}
	return errors.New(s)
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
