package runc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// tree makes the entries of spec under root: "dir/", "file", or
// "link -> target".
func tree(t *testing.T, root string, spec ...string) {
	t.Helper()
	for _, e := range spec {
		name, link, isLink := strings.Cut(e, " -> ")
		p := filepath.Join(root, strings.TrimSuffix(name, "/"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case isLink:
			err = os.Symlink(link, p)
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		default:
			err = os.WriteFile(p, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// testLayout is a container's layout with its home made, as Start's
// prepare makes it.
func testLayout(t *testing.T) layout {
	l := layout{dir: t.TempDir()}
	if err := os.Mkdir(l.home(), 0o700); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestResolveInRoot: symbolic links are followed inside the root, as
// runc follows them: an absolute one from the root (never the host's
// "/"), ".." stopping at it, what is missing taken as named.
func TestResolveInRoot(t *testing.T) {
	root := t.TempDir()
	tree(t, root,
		".troupe/bin/troupe-init",
		"x -> /.troupe/bin",
		"up -> ../../../../.troupe",
		"l1 -> l2", "l2 -> /real", "real/",
		"dangling -> /.troupe/new",
		"loop -> /loop",
		"etc/passwd -> /inside",
		"esc -> /etc",
		"file",
	)
	v := &view{mounts: []viewMount{{target: "/", host: root, kind: kindNode}}}
	for _, tc := range []struct{ in, want string }{
		{"/a/b", "/a/b"},
		{"/x/troupe-init", "/.troupe/bin/troupe-init"},
		{"/up/bin", "/.troupe/bin"},
		{"/l1/f", "/real/f"},
		{"/dangling/f", "/.troupe/new/f"},
		{"/esc/passwd", "/inside"},
		{"/real/../x", "/.troupe/bin"},
		{"/", "/"},
	} {
		got, err := v.resolve(tc.in, false, nil)
		if err != nil || got != tc.want {
			t.Errorf("resolve(%s) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if got, err := v.resolve("/loop/f", false, nil); !errors.Is(err, unix.ELOOP) {
		t.Errorf("resolve(/loop/f) = %q, %v; want ELOOP", got, err)
	}
	if got, err := v.resolve("/file/f", false, nil); err == nil {
		t.Errorf("resolve(/file/f) = %q; want an error (not a directory)", got)
	}
}

// TestResolveHostDirs: in the host's directories (the host image) a
// job's target is taken only from directories no one but root may
// write; a sticky one (as /var/tmp) only where the entry is root's.
func TestResolveHostDirs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root (files of other owners)")
	}
	skel, host := t.TempDir(), t.TempDir()
	tree(t, host, "lib/", "tmp/", "tmp/mine/", "tmp/roots/", "open/")
	if err := os.Chmod(filepath.Join(host, "tmp"), os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(host, "open"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(host, "tmp", "mine"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/.troupe/bin", filepath.Join(host, "tmp", "lnk")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(host, "tmp", "lnk"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	v := &view{mounts: []viewMount{{target: "/", host: skel, kind: kindNode}, {target: "/var", host: host, kind: kindHost}}}
	for _, tc := range []struct{ in, want string }{
		{"/var/lib/x", ""},
		{"/var/tmp/roots/x", ""},
		{"/var/tmp/mine/x", "leads through /var/tmp"},
		{"/var/tmp/lnk/troupe-init", "leads through /var/tmp"},
		{"/var/tmp/new", "leads through /var/tmp"},
		{"/var/open/x", "leads through /var/open"},
	} {
		_, err := v.resolve(tc.in, true, nil)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("resolve(%s): %v; want %q", tc.in, err, tc.want)
		}
	}
}

// TestJobTargets: a job's target that leads, through the image's
// symbolic links, onto or under a reserved path is refused, naming the
// mount and where it leads; one that leads elsewhere is mounted where it
// leads, made in the root when missing.
func TestJobTargets(t *testing.T) {
	root := t.TempDir()
	tree(t, root,
		".troupe/bin/troupe-init",
		"etc/hosts",
		"x -> /.troupe/bin",
		"t -> /.troupe",
		"r -> /",
		"up -> ../..",
		"p -> /proc/self/root/.troupe",
		"e -> /etc",
		"s -> /mnt/scratch",
		"mnt/scratch/",
	)
	srcDir, srcFile := t.TempDir(), filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(srcFile, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tree(t, srcDir, "in -> /.troupe", "sub/")
	l := testLayout(t)
	spec := func(ms ...runtime.Mount) runtime.Spec {
		return runtime.Spec{Image: root, Init: srcFile, InitLayered: true, Mounts: ms}
	}
	job := func(target, src string) runtime.Mount {
		return runtime.Mount{Source: src, Target: target, Job: "evil"}
	}
	for _, tc := range []struct {
		target string
		src    string
		want   string
	}{
		{"/x/troupe-init", srcFile, "leads to /.troupe/bin/troupe-init in the container (its symbolic links followed), on or under /.troupe, which is reserved"},
		{"/x", srcDir, "leads to /.troupe/bin"},
		{"/t", srcDir, "under /.troupe"},
		{"/r", srcDir, "leads to / in the container"},
		{"/up/.troupe/bin", srcDir, "under /.troupe"},
		{"/p/bin", srcDir, "leads into /proc"},
		{"/e/hosts", srcFile, "on or under /etc/hosts"},
		{"/.troupe/bin/troupe-init", srcFile, "under /.troupe"},
	} {
		_, err := jobTargets(spec(job(tc.target, tc.src)), l, root, nil, true)
		if !errors.Is(err, runtime.ErrMountTarget) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), `mount "evil"`) {
			t.Errorf("target %s: %v; want ErrMountTarget naming the mount with %q", tc.target, err, tc.want)
		}
	}

	// Elsewhere: mounted where the links lead, made when missing, a
	// file for a file.
	node := runtime.Mount{Source: srcFile, Target: "/etc/hosts", Layered: true}
	ms, err := jobTargets(spec(node, job("/s/data", srcDir), job("/s/f", srcFile)), l, root, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if ms[0] != node || ms[1].Target != "/mnt/scratch/data" || ms[2].Target != "/mnt/scratch/f" {
		t.Errorf("mounts %+v; want the node's as it was and the job's at /mnt/scratch/data and /mnt/scratch/f", ms)
	}
	if fi, err := os.Lstat(filepath.Join(root, "mnt/scratch/data")); err != nil || !fi.IsDir() {
		t.Errorf("mountpoint of the directory: %v, %v", fi, err)
	}
	if fi, err := os.Lstat(filepath.Join(root, "mnt/scratch/f")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("mountpoint of the file: %v, %v", fi, err)
	}

	// Through another job mount's source, which its owner can change
	// at any time: refused, link or not.
	for _, target := range []string{"/data/in/bin", "/data/sub"} {
		_, err = jobTargets(spec(job("/data", srcDir), job(target, srcDir)), l, root, nil, true)
		if !errors.Is(err, runtime.ErrMountTarget) || !errors.Is(err, errThroughJob) {
			t.Errorf("target %s under another job mount: %v; want ErrMountTarget, %v", target, err, errThroughJob)
		}
	}

	// runc mounts /tmp and the home where the image leads them: a
	// target under them is no further from /.troupe.
	for _, tc := range [][2]string{{"tmp -> /.troupe", "/tmp/bin"}, {"home/work -> /.troupe", "/home/work/bin"}} {
		img := t.TempDir()
		tree(t, img, ".troupe/bin/troupe-init", tc[0])
		_, err := jobTargets(spec(job(tc[1], srcDir)), testLayout(t), img, nil, true)
		if !errors.Is(err, runtime.ErrMountTarget) || !strings.Contains(err.Error(), "under /.troupe") {
			t.Errorf("image with %s, target %s: %v; want ErrMountTarget", tc[0], tc[1], err)
		}
	}

	// Without the layer, troupe-init is mounted where the image's
	// /.troupe leads: that is reserved too.
	moved := t.TempDir()
	tree(t, moved, ".troupe -> /opt/t", "opt/t/bin/")
	s := runtime.Spec{Image: moved, Init: srcFile, Mounts: []runtime.Mount{job("/opt/t/bin/troupe-init", srcFile)}}
	if _, err := jobTargets(s, l, moved, nil, false); !errors.Is(err, runtime.ErrMountTarget) || !strings.Contains(err.Error(), "where a reserved path leads") {
		t.Errorf("target where the image's /.troupe leads: %v; want ErrMountTarget", err)
	}
	// Nor above it: runc mounts troupe-init at /opt/t/bin/troupe-init
	// first, and a mount at /opt after it would hide that.
	for _, target := range []string{"/opt", "/opt/"} {
		s.Mounts = []runtime.Mount{job(target, srcDir)}
		if _, err := jobTargets(s, l, moved, nil, false); !errors.Is(err, runtime.ErrMountTarget) || !strings.Contains(err.Error(), "which holds /opt/t") {
			t.Errorf("target %s above where the image's /.troupe leads: %v; want ErrMountTarget", target, err)
		}
	}
	s.Mounts = []runtime.Mount{job("/opt/data", srcDir)}
	if _, err := jobTargets(s, l, moved, nil, false); err != nil {
		t.Errorf("target /opt/data beside where the image's /.troupe leads: %v", err)
	}
}

// TestPinOverlay: what a job's target resolved to stays so in the
// overlay after the image directory changes (the image's owner swaps a
// directory on the way for a symbolic link to /.troupe): its
// directories were copied up into the upper layer, root's, which the
// overlay shows before the image.
func TestPinOverlay(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root (mounts an overlay)")
	}
	image, layer := t.TempDir(), t.TempDir()
	tree(t, image, "data/in/", ".troupe/")
	tree(t, layer, ".troupe/bin/troupe-init")
	l := testLayout(t)
	mnt := filepath.Join(t.TempDir(), "root")
	if err := mountOverlay(image, layer, l, mnt); err != nil {
		t.Skipf("SKIP: cannot mount an overlay here: %v", err)
	}
	t.Cleanup(func() { _ = unmountOverlay(mnt) })
	src := t.TempDir()
	s := runtime.Spec{Image: image, Init: "/bin/true", InitLayered: true,
		Mounts: []runtime.Mount{{Source: src, Target: "/data/in/x", Job: "d"}}}
	ms, err := jobTargets(s, l, mnt, nil, true)
	if err != nil || ms[0].Target != "/data/in/x" {
		t.Fatalf("jobTargets: %+v, %v", ms, err)
	}
	for _, p := range []string{"data", "data/in", "data/in/x"} {
		if fi, err := os.Lstat(filepath.Join(l.upper(), p)); err != nil || !fi.IsDir() {
			t.Errorf("upper layer's %s: %v, %v; want a directory", p, fi, err)
		}
	}
	// The owner swaps /data for a link; the overlay, mounted afresh (as
	// when its cached entries are dropped), still shows the directories.
	if err := os.Rename(filepath.Join(image, "data"), filepath.Join(image, "old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/.troupe/bin", filepath.Join(image, "data")); err != nil {
		t.Fatal(err)
	}
	if err := unmountOverlay(mnt); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "overlay", "overlay", "-o",
		"lowerdir="+layer+":"+image+",upperdir="+l.upper()+",workdir="+l.work(), mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	for _, p := range []string{"data", "data/in", "data/in/x"} {
		if fi, err := os.Lstat(filepath.Join(mnt, p)); err != nil || !fi.IsDir() {
			t.Errorf("/%s after the image changed: %v, %v; want the directory that was checked", p, fi, err)
		}
	}
}

// TestMountOverInitThroughImageLink attacks as a user with an image of
// their own: /x -> /.troupe/bin in it and a mount of a script at
// /x/troupe-init. runc followed the link and the script became the
// container's first process, holding the exit file's descriptor (it
// wrote the exit status it liked). Now the start is refused, naming the
// mount and where its target leads; a target through a link to
// anywhere else is mounted where the link leads.
func TestMountOverInitThroughImageLink(t *testing.T) {
	r := newTestRuntime(t)
	init := runtimetest.BuildInit(t)
	image := filepath.Join(t.TempDir(), "rootfs")
	if out, err := exec.Command("cp", "-a", runtimetest.BusyboxRootfs(t), image).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	tree(t, image, "x -> /.troupe/bin", "s -> /mnt/scratch", "mnt/scratch/")
	evil := filepath.Join(t.TempDir(), "evil")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\necho I am pid $$\necho 0 >&3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec, out := runtimetest.NewSpec(t, init, "sh", "-c", "echo the job ran; exit 7")
	spec.Image = image
	spec.UID, spec.GID = 65534, 65534
	spec.Mounts = []runtime.Mount{{Source: evil, Target: "/x/troupe-init", ReadOnly: true, Job: "evil"}}
	c, err := r.Start(context.Background(), spec)
	if err == nil {
		e := runtimetest.WaitExit(t, c, 20*time.Second)
		_ = c.Destroy(context.Background())
		t.Fatalf("the container started: exit %+v, output %q", e, runtimetest.ReadFile(t, out))
	}
	if !errors.Is(err, runtime.ErrMountTarget) || !strings.Contains(err.Error(), `mount "evil"`) ||
		!strings.Contains(err.Error(), "/.troupe/bin/troupe-init") {
		t.Errorf("start: %v; want ErrMountTarget naming mount \"evil\" and /.troupe/bin/troupe-init", err)
	}
	if got := runtimetest.ReadFile(t, out); strings.Contains(got, "pid") {
		t.Errorf("the script ran: %q", got)
	}

	// An image whose /.troupe leads to /opt/t: runc mounts troupe-init
	// at /opt/t/bin/troupe-init, and a mount at /opt after it hid that
	// with the job's own bin/troupe-init.
	moved := filepath.Join(t.TempDir(), "rootfs")
	if out, err := exec.Command("cp", "-a", runtimetest.BusyboxRootfs(t), moved).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	tree(t, moved, ".troupe -> /opt/t", "opt/")
	cover := t.TempDir()
	tree(t, cover, "t/bin/")
	if err := os.Link(evil, filepath.Join(cover, "t", "bin", "troupe-init")); err != nil {
		t.Fatal(err)
	}
	spec, out = runtimetest.NewSpec(t, init, "sh", "-c", "echo the job ran; exit 7")
	spec.Image = moved
	spec.UID, spec.GID = 65534, 65534
	spec.Mounts = []runtime.Mount{{Source: cover, Target: "/opt", ReadOnly: true, Job: "evil"}}
	c, err = r.Start(context.Background(), spec)
	if err == nil {
		e := runtimetest.WaitExit(t, c, 20*time.Second)
		_ = c.Destroy(context.Background())
		t.Fatalf("the container above the moved /.troupe started: exit %+v, output %q", e, runtimetest.ReadFile(t, out))
	}
	if !errors.Is(err, runtime.ErrMountTarget) || !strings.Contains(err.Error(), "/opt/t") {
		t.Errorf("start above the moved /.troupe: %v; want ErrMountTarget naming /opt/t", err)
	}

	// An image whose /tmp leads to /.troupe: runc mounts the
	// container's /tmp there, and a mount at /tmp followed the link too.
	tmpLink := filepath.Join(t.TempDir(), "rootfs")
	if out, err := exec.Command("cp", "-a", runtimetest.BusyboxRootfs(t), tmpLink).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if err := os.RemoveAll(filepath.Join(tmpLink, "tmp")); err != nil {
		t.Fatal(err)
	}
	tree(t, tmpLink, "tmp -> /.troupe")
	spec, out = runtimetest.NewSpec(t, init, "sh", "-c", "echo the job ran; exit 7")
	spec.Image = tmpLink
	spec.UID, spec.GID = 65534, 65534
	spec.Mounts = []runtime.Mount{{Source: filepath.Join(cover, "t"), Target: "/tmp", ReadOnly: true, Job: "evil"}}
	c, err = r.Start(context.Background(), spec)
	if err == nil {
		e := runtimetest.WaitExit(t, c, 20*time.Second)
		_ = c.Destroy(context.Background())
		t.Fatalf("the container with /tmp -> /.troupe started: exit %+v, output %q", e, runtimetest.ReadFile(t, out))
	}
	if !errors.Is(err, runtime.ErrMountTarget) || !strings.Contains(err.Error(), "/.troupe") {
		t.Errorf("start with /tmp -> /.troupe: %v; want ErrMountTarget naming /.troupe", err)
	}

	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "hello"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, out = runtimetest.NewSpec(t, init, "cat", "/s/data/hello", "/mnt/scratch/data/hello")
	spec.Image = image
	spec.Mounts = []runtime.Mount{{Source: data, Target: "/s/data", ReadOnly: true, Job: "data"}}
	c = runtimetest.Start(t, r, spec)
	if e := runtimetest.WaitExit(t, c, 20*time.Second); e.Code != 0 || runtimetest.ReadFile(t, out) != "hello\nhello" {
		t.Errorf("mount through the image's link elsewhere: exit %+v, output %q", e, runtimetest.ReadFile(t, out))
	}
	if err := c.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestPinReservedInOverlay: without the node's layer, where the image
// leads /.troupe is where runc mounts troupe-init; the link is copied up
// (the image's owner swapping it afterwards changes nothing), and
// troupe-init's mountpoint is made in the upper layer. A file a job
// mounts over is replaced there by an empty one of root's (no copy of
// its data); the layer's own files are left as they are.
func TestPinReservedInOverlay(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root (mounts overlays)")
	}
	mount := func(t *testing.T, image, layer string, l layout) string {
		mnt := filepath.Join(t.TempDir(), "root")
		if err := mountOverlay(image, layer, l, mnt); err != nil {
			t.Skipf("SKIP: cannot mount an overlay here: %v", err)
		}
		t.Cleanup(func() { _ = unmountOverlay(mnt) })
		return mnt
	}
	src := t.TempDir()
	init := filepath.Join(t.TempDir(), "troupe-init")
	if err := os.WriteFile(init, []byte("init"), 0o755); err != nil {
		t.Fatal(err)
	}

	t.Run("MovedTroupe", func(t *testing.T) {
		image := t.TempDir()
		tree(t, image, ".troupe -> /opt/t", "opt/", "srv/t/bin/")
		l := testLayout(t)
		mnt := mount(t, image, "", l)
		s := runtime.Spec{Image: image, Init: init, Mounts: []runtime.Mount{{Source: src, Target: "/data", Job: "d"}}}
		if _, err := jobTargets(s, l, mnt, nil, false); err != nil {
			t.Fatal(err)
		}
		if link, err := os.Readlink(filepath.Join(l.upper(), ".troupe")); err != nil || link != "/opt/t" {
			t.Errorf("upper layer's /.troupe: %q, %v; want the link copied up", link, err)
		}
		if fi, err := os.Lstat(filepath.Join(l.upper(), "opt/t/bin/troupe-init")); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("troupe-init's mountpoint in the upper layer: %v, %v", fi, err)
		}
		if err := os.Remove(filepath.Join(image, ".troupe")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/srv/t", filepath.Join(image, ".troupe")); err != nil {
			t.Fatal(err)
		}
		if err := unmountOverlay(mnt); err != nil {
			t.Fatal(err)
		}
		if err := mountOverlay(image, "", l, mnt); err != nil {
			t.Fatal(err)
		}
		if link, err := os.Readlink(filepath.Join(mnt, ".troupe")); err != nil || link != "/opt/t" {
			t.Errorf("/.troupe after the image changed: %q, %v; want /opt/t, as checked", link, err)
		}
	})

	t.Run("Files", func(t *testing.T) {
		image, layer := t.TempDir(), t.TempDir()
		tree(t, image, "data/")
		if err := os.WriteFile(filepath.Join(image, "data", "f"), []byte("the image's"), 0o644); err != nil {
			t.Fatal(err)
		}
		tree(t, layer, ".troupe/bin/", "etc/")
		if err := os.WriteFile(filepath.Join(layer, ".troupe/bin/troupe-init"), []byte("init"), 0o755); err != nil {
			t.Fatal(err)
		}
		l := testLayout(t)
		mnt := mount(t, image, layer, l)
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, []byte("the job's"), 0o644); err != nil {
			t.Fatal(err)
		}
		s := runtime.Spec{Image: image, Layer: layer, Init: init, InitLayered: true,
			Mounts: []runtime.Mount{{Source: file, Target: "/data/f", Job: "f"}}}
		if _, err := jobTargets(s, l, mnt, nil, true); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(l.upper(), "data/f")); err != nil || len(b) != 0 {
			t.Errorf("upper layer's /data/f: %q, %v; want an empty file", b, err)
		}
		if _, err := os.Lstat(filepath.Join(l.upper(), ".troupe/bin/troupe-init")); err == nil {
			t.Error("troupe-init of the layer was copied up")
		}
		if b, err := os.ReadFile(filepath.Join(mnt, ".troupe/bin/troupe-init")); err != nil || string(b) != "init" {
			t.Errorf("troupe-init in the overlay: %q, %v; want the layer's", b, err)
		}
	})
}

// BenchmarkJobTargets: what resolving and fixing one job mount's target
// adds to a container's start, in an overlay with the node's layer.
func BenchmarkJobTargets(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("SKIP: needs root (mounts an overlay)")
	}
	image, layer, src := b.TempDir(), b.TempDir(), b.TempDir()
	for _, d := range []string{"etc", "tmp", "home/work", "proc", "sys", "dev", "data", filepath.Join(layer, ".troupe/bin"), filepath.Join(layer, "etc")} {
		if !filepath.IsAbs(d) {
			d = filepath.Join(image, d)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range []string{".troupe/bin/troupe-init", "etc/hosts", "etc/hostname"} {
		if err := os.WriteFile(filepath.Join(layer, f), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		b.StopTimer()
		l := layout{dir: b.TempDir()}
		if err := os.Mkdir(l.home(), 0o700); err != nil {
			b.Fatal(err)
		}
		mnt := filepath.Join(l.dir, "root")
		if err := mountOverlay(image, layer, l, mnt); err != nil {
			b.Skipf("SKIP: cannot mount an overlay here: %v", err)
		}
		s := runtime.Spec{Image: image, Layer: layer, Init: "/bin/true", InitLayered: true,
			Mounts: []runtime.Mount{{Source: src, Target: "/data/in", Job: "d"}}}
		b.StartTimer()
		if _, err := jobTargets(s, l, mnt, nil, true); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = unmountOverlay(mnt)
		b.StartTimer()
	}
}
