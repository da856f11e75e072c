package nodelet

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/asuser"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// Test users: nobody, and alice, a user created here (useradd) who is a
// member of the group share besides her own.
const (
	nobody     = 65534
	aliceName  = "troupe-alice"
	shareGroup = "troupe-share"
)

// testUser is a user the tests run as.
type testUser struct {
	name     string
	uid, gid int
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: opening as another user needs root")
	}
}

// alice creates (once) the user troupe-alice, member of troupe-share, and
// returns her and the group's gid.
func alice(t *testing.T) (testUser, int) {
	t.Helper()
	needRoot(t)
	run := func(argv ...string) {
		var out []byte
		var err error
		for range 10 { // another test package may hold /etc/passwd's lock
			if out, err = exec.Command(argv[0], argv[1:]...).CombinedOutput(); err == nil || strings.Contains(string(out), "already") {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Skipf("SKIP: %v: %v: %s", argv, err, out)
	}
	if _, err := user.LookupGroup(shareGroup); err != nil {
		run("groupadd", "--system", shareGroup)
	}
	if _, err := user.Lookup(aliceName); err != nil {
		run("useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", "--groups", shareGroup, aliceName)
	}
	u, err := user.Lookup(aliceName)
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroup(shareGroup)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	share, _ := strconv.Atoi(g.Gid)
	return testUser{aliceName, uid, gid}, share
}

// openDir makes a directory every user may search (the tests' own
// temporary directories are root's 0700).
func openDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func mkdir(t *testing.T, p string, mode os.FileMode, uid, gid int) string {
	t.Helper()
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, p, content string, mode os.FileMode, uid, gid int) string {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// openOut opens path as u's output file, the way buildSpec does.
func openOut(u testUser, path string) (*userFiles, error) {
	return openUserPaths(&userPaths{out: path}, u.uid, u.gid, "")
}

// TestOutputAsUser: a job's output and error files are opened by its
// user: not in /etc or /root, not through a symlinked directory, not
// onto a FIFO; a new file is the user's, mode 0600; a file the user may
// write through a supplementary group is appended to. (The old nodelet
// created every one of these as root and chowned it.)
func TestOutputAsUser(t *testing.T) {
	a, share := alice(t)
	nob := testUser{"nobody", nobody, nobody}
	dir := openDir(t)
	own := mkdir(t, filepath.Join(dir, "nobody"), 0o755, nobody, nobody)
	real := mkdir(t, filepath.Join(own, "real"), 0o755, nobody, nobody)
	if err := os.Symlink("real", filepath.Join(own, "lnk")); err != nil {
		t.Fatal(err)
	}
	shared := mkdir(t, filepath.Join(dir, "shared"), 0o770, 0, share)
	writeFile(t, filepath.Join(dir, "group-writable"), "old\n", 0o664, 0, share)
	if err := syscall.Mkfifo(filepath.Join(own, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(own, "fifo"), nobody, nobody); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		u    testUser
		path string
		want error // nil: opened
	}{
		{"Etc", nob, "/etc/troupe-test-x-1.out", fs.ErrPermission},
		{"Root", nob, "/root/troupe-test-y-1.err", fs.ErrPermission},
		{"SymlinkedDir", nob, filepath.Join(own, "lnk", "x.out"), asuser.ErrSymlink},
		{"FIFO", nob, filepath.Join(own, "fifo"), syscall.ENXIO},
		{"OwnDir", nob, filepath.Join(real, "x.out"), nil},
		{"GroupDirNotMember", nob, filepath.Join(shared, "x.out"), fs.ErrPermission},
		{"GroupDirMember", a, filepath.Join(shared, "x.out"), nil},
		{"GroupFileMember", a, filepath.Join(dir, "group-writable"), nil},
		{"GroupFileNotMember", nob, filepath.Join(dir, "group-writable"), fs.ErrPermission},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, statErr := os.Lstat(tc.path)
			existed := statErr == nil
			f, err := openOut(tc.u, tc.path)
			if tc.want != nil {
				if err == nil {
					f.Close()
					t.Fatalf("%s opened %s as %s; want %v", tc.name, tc.path, tc.u.name, tc.want)
				}
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "output "+tc.path) {
					t.Errorf("err = %v; want %v naming the output", err, tc.want)
				}
				if _, err := os.Lstat(tc.path); !existed && err == nil {
					t.Errorf("%s was created", tc.path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.out.WriteString("new\n"); err != nil {
				t.Fatal(err)
			}
			f.Close()
			fi, _ := os.Stat(tc.path)
			if st := fi.Sys().(*syscall.Stat_t); !existed && (int(st.Uid) != tc.u.uid || int(st.Gid) != tc.u.gid || fi.Mode().Perm() != 0o600) {
				t.Errorf("new output %s: %v %d:%d, want 0600 %d:%d", tc.path, fi.Mode().Perm(), st.Uid, st.Gid, tc.u.uid, tc.u.gid)
			}
			if b, _ := os.ReadFile(tc.path); existed && string(b) != "old\nnew\n" {
				t.Errorf("existing output = %q, want appended", b)
			}
		})
	}
}

// TestOutputDevNull: /dev/null as output or error file discards (bsub -o
// /dev/null, sbatch --output=/dev/null); the other file is still the
// user's own; any other device stays refused.
func TestOutputDevNull(t *testing.T) {
	needRoot(t)
	dir := openDir(t)
	own := mkdir(t, filepath.Join(dir, "nobody"), 0o755, nobody, nobody)
	for _, p := range []userPaths{
		{out: os.DevNull},
		{out: os.DevNull, err: filepath.Join(own, "e.err")},
		{out: filepath.Join(own, "o.out"), err: os.DevNull},
	} {
		f, err := openUserPaths(&userPaths{out: p.out, err: p.err}, nobody, nobody, "")
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		for _, w := range []*os.File{f.out, f.err} {
			if _, err := w.WriteString("x\n"); err != nil {
				t.Errorf("%+v: writing %s: %v", p, w.Name(), err)
			}
		}
		if len(f.held) != 0 {
			t.Errorf("%+v: held %v, want none", p, f.held)
		}
		f.Close()
		for _, path := range []string{p.out, p.err} {
			if path == "" || path == os.DevNull {
				continue
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Sys().(*syscall.Stat_t).Uid != nobody || fi.Size() != 2 {
				t.Errorf("%+v: %s: %v, %v; want nobody's, with the line", p, path, fi, err)
			}
		}
	}
	if fi, err := os.Stat(os.DevNull); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null: %v %v", fi, err)
	}
	if f, err := openOut(testUser{"nobody", nobody, nobody}, "/dev/zero"); err == nil {
		f.Close()
		t.Error("/dev/zero opened as an output file; want it refused")
	} else if !errors.Is(err, asuser.ErrNotRegular) {
		t.Errorf("/dev/zero: %v, want %v", err, asuser.ErrNotRegular)
	}
}

// TestSameAnswersAsOnTheHost: for each user and path (none through a
// symlink), troupe opens an output file, or takes a mount source, exactly
// when the same user in a login shell on the host (runuser, with the
// groups a login gets) can append to it, or read it.
func TestSameAnswersAsOnTheHost(t *testing.T) {
	a, share := alice(t)
	if _, err := exec.LookPath("runuser"); err != nil {
		t.Skip("SKIP: needs runuser (util-linux)")
	}
	users := []testUser{{"nobody", nobody, nobody}, a}
	dir := openDir(t)
	private := mkdir(t, filepath.Join(dir, "alice-0700"), 0o700, a.uid, a.gid)
	pub := mkdir(t, filepath.Join(private, "pub"), 0o755, a.uid, a.gid)
	writeFile(t, filepath.Join(pub, "data"), "secret\n", 0o644, a.uid, a.gid)
	group := mkdir(t, filepath.Join(dir, "group-0750"), 0o750, 0, share)
	writeFile(t, filepath.Join(group, "data"), "team\n", 0o640, 0, share)
	noread := mkdir(t, filepath.Join(dir, "noread-0711"), 0o711, 0, 0)
	writeFile(t, filepath.Join(noread, "data"), "x\n", 0o644, 0, 0)
	paths := []string{
		"/etc/troupe-test.out", "/root/troupe-test.out", "/etc/passwd", "/etc/shadow", "/tmp/troupe-test-" + strconv.Itoa(os.Getpid()),
		filepath.Join(pub, "x.out"), filepath.Join(pub, "data"), pub, private,
		filepath.Join(group, "x.out"), filepath.Join(group, "data"), group,
		noread, filepath.Join(noread, "data"), filepath.Join(dir, "missing", "x"),
	}
	defer os.Remove(paths[4])
	for _, u := range users {
		for _, p := range paths {
			host := func(script string) bool {
				return exec.Command("runuser", "-u", u.name, "--", "sh", "-c", script, "sh", p).Run() == nil
			}
			// Output: the host answer first, leaving no file behind.
			_, statErr := os.Lstat(p)
			hostOut := host(`: >> "$1"`)
			if statErr != nil {
				os.Remove(p)
			}
			f, err := openOut(u, p)
			if f != nil {
				f.Close()
			}
			if statErr != nil {
				os.Remove(p)
			}
			if (err == nil) != hostOut {
				t.Errorf("output %s as %s: troupe %v, host shell %v", p, u.name, err, hostOut)
			}
			// Mount source: readable on the host.
			hostRead := host(`test -r "$1"`)
			ms := []runtime.Mount{{Source: p, Target: "/data"}}
			f, err = openUserPaths(&userPaths{out: filepath.Join(dir, "sink-"+u.name), mounts: ms, names: []string{"d"}}, u.uid, u.gid, "")
			if f != nil {
				f.Close()
			}
			if (err == nil) != hostRead && !strings.Contains(err.Error(), "output") {
				t.Errorf("mount source %s as %s: troupe %v, host test -r %v", p, u.name, err, hostRead)
			}
		}
	}
}

// TestMountSourceAsUser: a directory under alice's 0700 home is not
// mountable by nobody (the old nodelet mounted it: a bind mount skips the
// directories above), while alice may.
func TestMountSourceAsUser(t *testing.T) {
	a, _ := alice(t)
	dir := openDir(t)
	private := mkdir(t, filepath.Join(dir, "alice-0700"), 0o700, a.uid, a.gid)
	pub := mkdir(t, filepath.Join(private, "pub"), 0o755, a.uid, a.gid)
	ms, names, err := checkMounts([]api.Mount{{Name: "pub", Source: pub, Target: "/data"}}, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	sink := mkdir(t, filepath.Join(dir, "sink"), 0o777, 0, 0)
	_, err = openUserPaths(&userPaths{out: filepath.Join(sink, "n.out"), mounts: append([]runtime.Mount{}, ms...), names: names}, nobody, nobody, "")
	if !errors.Is(err, ErrMountRefused) || !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), `mount "pub"`) {
		t.Errorf("nobody mounting %s: err %v, want a refusal (permission denied) naming the mount", pub, err)
	}
	f, err := openUserPaths(&userPaths{out: filepath.Join(sink, "a.out"), mounts: append([]runtime.Mount{}, ms...), names: names}, a.uid, a.gid, "")
	if err != nil {
		t.Fatalf("alice mounting her own %s: %v", pub, err)
	}
	f.Close()
}

// TestImageAsUser: an image given by path is the submitter's to use: a
// rootfs directory of her own, an image file she may read; another
// user's directory, /etc, and a path that does not exist get the same
// refusal, so the answer tells nothing of other users' files.
func TestImageAsUser(t *testing.T) {
	a, _ := alice(t)
	dir := openDir(t)
	aliceRootfs := mkdir(t, filepath.Join(dir, "alice-rootfs"), 0o755, a.uid, a.gid)
	private := mkdir(t, filepath.Join(dir, "alice-0700"), 0o700, a.uid, a.gid)
	hidden := mkdir(t, filepath.Join(private, "rootfs"), 0o755, a.uid, a.gid)
	sif := writeFile(t, filepath.Join(dir, "img.sif"), "x", 0o644, 0, 0)
	secretSIF := writeFile(t, filepath.Join(dir, "secret.sif"), "x", 0o600, a.uid, a.gid)
	sink := mkdir(t, filepath.Join(dir, "sink"), 0o777, 0, 0)
	nob := testUser{"nobody", nobody, nobody}
	tests := []struct {
		name string
		u    testUser
		path string
		ok   bool
	}{
		{"OwnRootfs", a, aliceRootfs, true},
		{"OthersRootfs", nob, aliceRootfs, false},
		{"OthersHiddenRootfs", nob, hidden, false},
		{"Etc", nob, "/etc", false},
		{"Missing", nob, filepath.Join(dir, "nope"), false},
		{"ReadableFile", nob, sif, true},
		{"UnreadableFile", nob, secretSIF, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := openUserPaths(&userPaths{out: filepath.Join(sink, tc.u.name+".out"), image: tc.path}, tc.u.uid, tc.u.gid, "")
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
				return
			}
			want := "image " + tc.path + ": " + ErrImageRefused.Error()
			if err == nil || !errors.Is(err, ErrImageRefused) || err.Error() != want {
				t.Errorf("err = %v, want exactly %q", err, want)
			}
		})
	}
}

// handTo makes paths reachable by uid (every directory above them
// searchable) and, for a rootfs, hands the tree to uid:gid: what a job
// of uid needs to use them.
func handTo(t *testing.T, uid, gid int, paths ...string) {
	t.Helper()
	for _, p := range paths {
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				_ = os.Chmod(d, fi.Mode().Perm()|0o011)
			}
		}
		err := filepath.WalkDir(p, func(q string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(q, uid, gid)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
