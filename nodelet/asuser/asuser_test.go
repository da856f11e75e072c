package asuser

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: taking another user's credentials needs root")
	}
}

// TestOpenAsUser: paths are opened with the user's permissions: a file
// created in the user's directory is the user's (0600), root's private
// directory and /etc/shadow are refused, a relative path is taken from
// "/", and a symlinked component is refused.
func TestOpenAsUser(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // searchable by nobody
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	own := filepath.Join(dir, "own")
	private := filepath.Join(dir, "private")
	for _, d := range []string{own, private} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(own, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("own", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	reqs := []Request{
		{Kind: Output, Path: filepath.Join(own, "x.out")},
		{Kind: Output, Path: filepath.Join(private, "x.out")},
		{Kind: Source, Path: "/etc/shadow"},
		{Kind: Source, Path: own[1:]}, // relative: from /
		{Kind: Output, Path: filepath.Join(dir, "link", "y.out")},
		{Kind: Image, Path: own},
	}
	res, err := Open(Cred{UID: nobody, GID: nobody, Groups: []int{nobody}}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(res)
	want := []error{nil, fs.ErrPermission, fs.ErrPermission, nil, syscall.ELOOP, nil}
	for i, w := range want {
		r := res[i]
		if w == nil && (r.Err != nil || r.File == nil) || w != nil && (!errors.Is(r.Err, w) || r.File != nil) {
			t.Errorf("%s %s: file %v, err %v; want err %v", reqs[i].Kind, reqs[i].Path, r.File != nil, r.Err, w)
		}
	}
	fi, err := os.Stat(filepath.Join(own, "x.out"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobody || st.Gid != nobody || fi.Mode().Perm() != 0o600 {
		t.Errorf("created output: %v %d:%d, want 0600 %d:%d", fi.Mode().Perm(), st.Uid, st.Gid, nobody, nobody)
	}
	if _, err := os.Lstat(filepath.Join(private, "x.out")); err == nil {
		t.Error("the refused output was created")
	}
}

// TestOpenLeavesOtherThreadsRoot: the thread that took a user's
// credentials is never given back, so after many Opens every goroutine,
// each on a thread of the pool, still has root's fsuid and capabilities;
// and the real and effective uids never changed.
func TestOpenLeavesOtherThreadsRoot(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	for range 20 {
		res, err := Open(Cred{UID: nobody, GID: nobody, Groups: []int{nobody}}, []Request{{Kind: Source, Path: dir}})
		if err != nil {
			t.Fatal(err)
		}
		closeAll(res)
	}
	// 64 goroutines each holding a thread at once: the idle threads of
	// the pool are among them.
	var wg, held sync.WaitGroup
	release := make(chan struct{})
	errs := make(chan string, 64)
	for range 64 {
		wg.Add(1)
		held.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			defer func() { held.Done(); <-release }()
			fsuid, _ := unix.SetfsuidRetUid(-1)
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var caps [2]unix.CapUserData
			if err := unix.Capget(&hdr, &caps[0]); err != nil {
				errs <- err.Error()
				return
			}
			if fsuid != 0 || caps[0].Effective&(1<<unix.CAP_DAC_OVERRIDE) == 0 || unix.Getuid() != 0 || unix.Geteuid() != 0 {
				errs <- "a thread of the pool has lost root's credentials"
			}
		}()
	}
	held.Wait()
	close(release)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestOpenReadBeneath: a Read request opens a regular file beneath its
// directory as the user: not through a symbolic link, not up and out
// with "..", not a directory, not a file the user may not read.
func TestOpenReadBeneath(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(dir, "img")
	if err := os.MkdirAll(filepath.Join(img, "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(img, "blobs", "ok"), 0o644)
	write(filepath.Join(img, "blobs", "private"), 0o600)
	write(filepath.Join(dir, "outside"), 0o644)
	if err := os.Symlink("ok", filepath.Join(img, "blobs", "link")); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := Cred{UID: nobody, GID: nobody, Groups: []int{nobody}}
	for name, want := range map[string]error{
		"blobs/ok":      nil,
		"blobs/private": fs.ErrPermission,
		"blobs/link":    ErrSymlink,
		"../outside":    syscall.EXDEV,
		"/etc/passwd":   syscall.EXDEV,
		"blobs":         ErrNotRegular,
	} {
		f, err := OpenIn(c, d, name)
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("%s: %v; want %v", name, err, want)
		}
		if f != nil {
			f.Close()
		}
	}
}

// TestOutputMakesItsDirectory: an output file whose directories do not
// exist yet (bsub -o logs/%J.out with no logs/) gets them, made with the
// user's credentials (owned by the user, as mkdir makes them); where the
// user may not write nothing is made, and a symbolic link on the way is
// not followed, even one the user planted where a directory would go.
func TestOutputMakesItsDirectory(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(dir, "own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "roots")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(own, "planted")); err != nil {
		t.Fatal(err)
	}
	reqs := []Request{
		{Kind: Output, Path: filepath.Join(own, "logs", "deep", "1.out")},
		{Kind: Output, Path: filepath.Join(own, "logs", "deep", "2.out")},
		{Kind: Output, Path: filepath.Join(dir, "rootonly", "x.out")},
		{Kind: Output, Path: filepath.Join(own, "planted", "sub", "x.out")},
	}
	res, err := Open(Cred{UID: nobody, GID: nobody, Groups: []int{nobody}}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(res)
	want := []error{nil, nil, fs.ErrPermission, syscall.ELOOP}
	for i, w := range want {
		r := res[i]
		if w == nil && (r.Err != nil || r.File == nil) || w != nil && (!errors.Is(r.Err, w) || r.File != nil) {
			t.Errorf("%s: file %v, err %v; want err %v", reqs[i].Path, r.File != nil, r.Err, w)
		}
	}
	for _, d := range []string{filepath.Join(own, "logs"), filepath.Join(own, "logs", "deep")} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || st.Uid != nobody || st.Gid != nobody {
			t.Errorf("%s: %v %d:%d, want a directory of %d:%d", d, fi.Mode(), st.Uid, st.Gid, nobody, nobody)
		}
	}
	for _, p := range []string{filepath.Join(dir, "rootonly"), filepath.Join(target, "sub")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was made", p)
		}
	}
}
