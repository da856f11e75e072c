package nodelet

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// toolsDir holds the nodelet's copies of the binaries it puts in runc
// containers (toolCopies).
func (a *agent) toolsDir() string { return filepath.Join(a.cfg.RunDir, "tools") }

// toolCopies keeps a copy of each binary the nodelet puts in its runc
// containers (troupe-init, troupe-ssh, troupe-slurm) in the run
// directory, so that a container gets them as hard links in its layer
// (runtime.Spec.Layer), on the same file system as its other files,
// instead of one bind mount each at its start. A copy follows its
// source: when the file at the configured path is another, or changed
// (an upgrade), the next container gets a fresh copy; containers that
// link the old one keep it (a hard link outlives the name), so nothing
// a running container sees ever changes under it.
type toolCopies struct {
	dir string // in RunDir, root's 0700

	mu     sync.Mutex
	made   int                 // copies made: names them apart
	copies map[string]toolCopy // by source path
}

// toolCopy is a copy of a binary, and which file it copies.
type toolCopy struct {
	path string
	of   fileID
}

// fileID tells a file's content apart without reading it: a new file
// has another inode, a rewritten one another size or time stamps.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

func idOf(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}, true
}

func newToolCopies(dir string) *toolCopies {
	return &toolCopies{dir: dir, copies: map[string]toolCopy{}}
}

// link makes dst a hard link of the copy of the binary at src, copying it
// first when there is no copy of the file now at src.
func (tc *toolCopies) link(src, dst string) error {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	id, ok := idOf(fi)
	if !ok {
		return fmt.Errorf("%s: no inode", src)
	}
	c, ok := tc.copies[src]
	if !ok || c.of != id {
		if c, err = tc.copyLocked(src); err != nil {
			return err
		}
	}
	return os.Link(c.path, dst)
}

// copyLocked copies the binary at src into tc.dir, without write
// permission for anyone, and makes it src's copy.
func (tc *toolCopies) copyLocked(src string) (toolCopy, error) {
	in, err := os.Open(src)
	if err != nil {
		return toolCopy{}, err
	}
	defer in.Close()
	before, err := in.Stat()
	if err != nil {
		return toolCopy{}, err
	}
	if !before.Mode().IsRegular() {
		return toolCopy{}, fmt.Errorf("%s: not a regular file", src)
	}
	id, _ := idOf(before)
	if err := os.MkdirAll(tc.dir, 0o700); err != nil {
		return toolCopy{}, err
	}
	tmp, err := os.CreateTemp(tc.dir, ".copy-")
	if err != nil {
		return toolCopy{}, err
	}
	_, err = io.Copy(tmp, in)
	if err == nil {
		err = tmp.Chmod(before.Mode().Perm() &^ 0o222)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Written to while copied (not by an upgrade, which puts a new
		// file in place): the copy may be torn.
		if after, serr := in.Stat(); serr != nil {
			err = serr
		} else if aid, _ := idOf(after); aid != id {
			err = errors.New("changed while being copied")
		}
	}
	if err != nil {
		os.Remove(tmp.Name())
		return toolCopy{}, fmt.Errorf("copying %s: %w", src, err)
	}
	tc.made++
	c := toolCopy{path: filepath.Join(tc.dir, fmt.Sprintf("%d-%s", tc.made, filepath.Base(src))), of: id}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		os.Remove(tmp.Name())
		return toolCopy{}, err
	}
	if old, ok := tc.copies[src]; ok {
		os.Remove(old.path) // the containers that link it keep it
	}
	tc.copies[src] = c
	return c, nil
}
