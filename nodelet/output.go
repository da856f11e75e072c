package nodelet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/nodelet/asuser"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/session"
)

// ErrImageRefused: an image given by path that the job's user may not
// use. The same words for a path that does not exist and for one that is
// not the user's, so that the answer tells nothing about other users'
// files.
var ErrImageRefused = errors.New("not found, or not yours to use: an image path must be a rootfs directory you own and may read, " +
	"an OCI layout directory or an image file you may read, reached through no symbolic link (or name a catalog image)")

// userPaths are the paths of a job that name host files: its output and
// error files, its mount sources, its image when given by path.
type userPaths struct {
	out, err string          // err "" or out: stderr joins stdout
	mounts   []runtime.Mount // Source rewritten to the opened file
	names    []string        // the mounts' names in the job file
	image    string          // "" when none to check (host, catalog)
}

// userFiles are what openUserPaths opened: the caller closes them once
// the runtime started the container (which holds its own copies).
type userFiles struct {
	out, err *os.File   // err == out without an error file
	held     []*os.File // mount sources and image, held open until started
	pins     string     // the pins' directory; "" when none
	imagePin string     // the image's pin, imagePath's stand-in; "" when none
	imageArg string     // the image path the job named
	outPath  string
	errPath  string // outPath without an error file
}

// Close closes them all.
func (f *userFiles) Close() error {
	var errs []error
	if f.pins != "" {
		errs = append(errs, unpin(f.pins))
	}
	if f.out != nil {
		errs = append(errs, f.out.Close())
	}
	if f.err != nil && f.err != f.out {
		errs = append(errs, f.err.Close())
	}
	for _, h := range f.held {
		errs = append(errs, h.Close())
	}
	return errors.Join(errs...)
}

// openUserPaths opens p's paths with the credentials of uid:gid (and the
// user's supplementary groups, as a login gets them) in one asuser.Open
// call: the output and error files are created by the user, never
// by root then chowned; a mount source is checked for the user's search
// permission on every directory above it and read permission on itself,
// and its Source becomes the opened file (/proc/PID/fd/N of the
// nodelet), so the path cannot be swapped between check and mount; an
// image path must be the user's to use. No path may go through a
// symbolic link.
//
// With pins set, each opened mount source and image is bind-mounted
// under pins (see pin) and the runtime gets that path instead of the
// one the job named, so nothing can be swapped between this check and
// the runtime's mount; Close unmounts them. Without (runtimes that mount
// nothing themselves, or read the image after Start), the checked
// path is passed on as it is.
func openUserPaths(p *userPaths, uid, gid int, pins string) (*userFiles, error) {
	if pins != "" {
		if err := unpin(pins); err != nil { // a crashed start's leftovers
			return nil, err
		}
	}
	var reqs []asuser.Request
	if p.image != "" {
		reqs = append(reqs, asuser.Request{Kind: asuser.Image, Path: p.image})
	}
	for _, m := range p.mounts {
		reqs = append(reqs, asuser.Request{Kind: asuser.Source, Path: m.Source})
	}
	// /dev/null discards, as `bsub -o /dev/null` and `sbatch
	// --output=/dev/null` ask: the node's own, a device no job can
	// change or replace, opened by the nodelet; any other path that is
	// not a regular file stays refused.
	outNull := p.out == os.DevNull
	hasErr := p.err != "" && p.err != p.out
	errNull := hasErr && p.err == os.DevNull
	if !outNull {
		reqs = append(reqs, asuser.Request{Kind: asuser.Output, Path: p.out})
	}
	if hasErr && !errNull {
		reqs = append(reqs, asuser.Request{Kind: asuser.Output, Path: p.err})
	}
	res, err := asuser.Open(asuser.Lookup(uid, gid), reqs)
	if err != nil {
		return nil, err
	}
	f := &userFiles{pins: pins, outPath: p.out, errPath: p.out}
	for _, r := range res {
		if r.File != nil {
			f.held = append(f.held, r.File)
		}
	}
	fail := func(err error) (*userFiles, error) {
		f.Close()
		return nil, err
	}
	i := 0
	if p.image != "" {
		if res[i].Err != nil {
			return fail(fmt.Errorf("image %s: %w", p.image, ErrImageRefused))
		}
		if pins != "" {
			pinned, err := pin(res[i].File, filepath.Join(pins, "image"), filepath.Base(p.image))
			if err != nil {
				return fail(fmt.Errorf("image %s: %w", p.image, err))
			}
			f.imagePin, f.imageArg, p.image = pinned, p.image, pinned
		}
		i++
	}
	for k := range p.mounts {
		if res[i].Err != nil {
			return fail(fmt.Errorf("mount %q: %w: source %s: %w", p.names[k], ErrMountRefused, p.mounts[k].Source, asuser.Describe(res[i].Err)))
		}
		if pins != "" {
			pinned, err := pin(res[i].File, pins, "m"+strconv.Itoa(k))
			if err != nil {
				return fail(fmt.Errorf("mount %q: %w", p.names[k], err))
			}
			p.mounts[k].Source = pinned
		}
		i++
	}
	// out and err are closed by Close as such, not as held files: the
	// helper's are the last results.
	var outputs []*os.File
	for _, r := range res[i:] {
		if r.File != nil {
			outputs = append(outputs, r.File)
		}
	}
	f.held = f.held[:len(f.held)-len(outputs)]
	failOutputs := func(err error) (*userFiles, error) {
		for _, o := range outputs {
			if o != f.out && o != f.err {
				o.Close()
			}
		}
		return fail(err)
	}
	open := func(what, path string) (*os.File, error) {
		if path == os.DevNull {
			return os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		}
		r := res[i]
		i++
		if r.Err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, path, asuser.Describe(r.Err))
		}
		return r.File, nil
	}
	if f.out, err = open("output", p.out); err != nil {
		return failOutputs(err)
	}
	f.err = f.out
	if hasErr {
		errFile, err := open("error file", p.err)
		if err != nil {
			return failOutputs(err)
		}
		f.err, f.errPath = errFile, p.err
	}
	return f, nil
}

// named words err with the image path the job named where it says the
// image's pin (the runtime read the image there, and names that): the
// user sees his own path. The error is still err for errors.Is.
func (f *userFiles) named(err error) error {
	if err == nil || f.imagePin == "" || !strings.Contains(err.Error(), f.imagePin) {
		return err
	}
	return &renamed{err, strings.ReplaceAll(err.Error(), f.imagePin, f.imageArg)}
}

type renamed struct {
	err error
	msg string
}

func (r *renamed) Error() string { return r.msg }
func (r *renamed) Unwrap() error { return r.err }

// outputCheckEvery is how often the size of a running job's output and
// error files is measured against its partition's max_output.
const outputCheckEvery = time.Second

// watchedOutput is an output or error file a task measures: its own
// descriptor of the file the container writes to (renaming or removing
// the path changes nothing).
type watchedOutput struct {
	path string
	f    *os.File
}

// watchOutputs duplicates the output and error files buildSpec opened,
// for the task to measure while the container runs; the error file (or
// the output file, when stderr joins it) comes last.
func watchOutputs(f *userFiles) []watchedOutput {
	var ws []watchedOutput
	for _, o := range []struct {
		path string
		f    *os.File
	}{{f.outPath, f.out}, {f.errPath, f.err}} {
		if len(ws) > 0 && o.f == f.out {
			break
		}
		fd, err := unix.FcntlInt(o.f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			continue
		}
		ws = append(ws, watchedOutput{path: o.path, f: os.NewFile(uintptr(fd), o.path)})
	}
	return ws
}

// watchOutputs makes sure t has its output files to watch: a container
// this nodelet re-attached to has them opened again, as the job's user.
func (a *launcher) watchOutputs(t *task) {
	if t.outputs != nil {
		return
	}
	outPath, err := session.OutputPath(t.job, t.key.host)
	if err != nil {
		return
	}
	errPath, err := session.ErrorPath(t.job, t.key.host)
	if err != nil {
		return
	}
	f, err := openUserPaths(&userPaths{out: outPath, err: errPath}, t.job.UID, t.job.GID, "")
	if err != nil {
		a.log.Warn("output files not reopened: max_output not enforced for this container", "id", t.id(), "err", err)
		t.outputs = []watchedOutput{}
		return
	}
	t.outputs = watchOutputs(f)
	f.Close()
}

func (t *task) closeOutputs() {
	for _, o := range t.outputs {
		o.f.Close()
	}
	t.outputs = nil
}

// outputLimit is the max_output of job's assignment; 0: none. a.mu is
// taken.
func (a *launcher) outputLimit(job uint64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, asg := range a.last.Assignments {
		if asg.Job.ID == job {
			return asg.MaxOutput
		}
	}
	return 0
}

// outputOverLimit says which of t's output files passed its partition's
// max_output, "" when none.
func (a *launcher) outputOverLimit(t *task) string {
	limit := a.outputLimit(t.key.job)
	if limit <= 0 {
		return ""
	}
	for _, o := range t.outputs {
		fi, err := o.f.Stat()
		if err == nil && fi.Size() > limit {
			return fmt.Sprintf("output file %s passed the partition's max_output %s", o.path, jobspec.FormatMemory(limit))
		}
	}
	return ""
}

// killForOutput ends a container whose output passed max_output: it
// says so at the end of the job's error file, then kills it at once (a
// grace period would let it write on).
func (a *launcher) killForOutput(t *task, c runtime.Container, exited <-chan runtime.Exit, msg string) (api.ContainerState, runtime.Exit, string) {
	a.log.Warn("killing container", "id", c.ID(), "why", msg)
	if n := len(t.outputs); n > 0 {
		fmt.Fprintf(t.outputs[n-1].f, "\ntroupe: job %d (%s): %s; the job was killed\n", t.key.job, t.key.host, msg)
	}
	_ = c.Signal(syscall.SIGKILL)
	select {
	case e := <-exited:
		return api.ContainerFailed, e, msg
	case <-time.After(killWait):
		return api.ContainerFailed, runtime.Exit{Code: 128 + int(syscall.SIGKILL)}, msg
	}
}
