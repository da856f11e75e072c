package nodelet

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/nodelet/asuser"
	"github.com/troupe-hpc/troupe/nodelet/image"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runc"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// TestImageLayoutReadAsUser: an OCI layout nobody names by path is read
// as nobody all the way down, the way a job starts it: openUserPaths
// pins the layout directory, and the runc runtime opens index.json and
// every blob beneath the pin with nobody's credentials. nobody's layout
// whose layer blob is a symbolic link (or a hard link) to alice's
// private image, in her 0700 directory, is refused, and nothing of hers
// reaches the image cache; nor does his copy of her layout with his own
// layer under her layer's name (a digest error); his own layout unpacks.
func TestImageLayoutReadAsUser(t *testing.T) {
	a, _ := alice(t)
	dir := openDir(t)
	// alice's private image: her layout, in her 0700 directory.
	src := filepath.Join(t.TempDir(), "secret")
	if err := os.MkdirAll(filepath.Join(src, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "etc", "motd"), "alice's secret\n", 0o644, 0, 0)
	_, layout, _ := runtimetest.BuildOCI(t, src)
	home := mkdir(t, filepath.Join(dir, "alice"), 0o700, a.uid, a.gid)
	private := filepath.Join(home, "img")
	cpTree(t, layout, private, a.uid, a.gid)
	blobs, err := filepath.Glob(filepath.Join(private, "blobs", "sha256", "*"))
	if err != nil || len(blobs) == 0 {
		t.Fatalf("alice's blobs: %v %v", blobs, err)
	}
	for _, b := range blobs {
		_ = os.Chmod(b, 0o600)
	}
	sink := mkdir(t, filepath.Join(dir, "sink"), 0o777, 0, 0)

	// start runs a container of nobody's on the image ref as a job would.
	start := func(t *testing.T, ref string) (cache string, err error) {
		state := t.TempDir()
		r, rerr := runc.New("", state)
		if rerr != nil {
			t.Skipf("SKIP: needs the runc binary: %v", rerr)
		}
		t.Cleanup(func() { _ = r.Cleanup(context.Background()) })
		paths := &userPaths{out: filepath.Join(sink, "out"), image: ref}
		files, err := openUserPaths(paths, nobody, nobody, filepath.Join(t.TempDir(), "pins"))
		if err != nil {
			t.Fatalf("openUserPaths: %v", err)
		}
		defer files.Close()
		spec, _ := runtimetest.NewSpec(t, "/bin/true", "true")
		spec.Image, spec.ImageAsUser, spec.UID, spec.GID = paths.image, true, nobody, nobody
		c, err := r.Start(context.Background(), spec)
		if err == nil {
			_ = c.Destroy(context.Background())
		}
		return filepath.Join(state, "images"), err
	}
	tests := []struct {
		name string
		link func(oldname, newname string) error
		want error
	}{
		{"Symlink", os.Symlink, asuser.ErrSymlink},
		{"Hardlink", os.Link, os.ErrPermission},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bobs := filepath.Join(mkdir(t, filepath.Join(dir, "nobody-"+tc.name), 0o755, nobody, nobody), "img")
			cpTree(t, layout, bobs, nobody, nobody)
			for _, b := range blobs {
				p := filepath.Join(bobs, "blobs", "sha256", filepath.Base(b))
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				if err := tc.link(b, p); err != nil {
					t.Fatal(err)
				}
			}
			cache, err := start(t, bobs)
			if !errors.Is(err, tc.want) {
				t.Fatalf("nobody's layout linking alice's blobs: %v; want %v", err, tc.want)
			}
			if got, _ := filepath.Glob(filepath.Join(cache, "*", "rootfs")); len(got) > 0 {
				t.Errorf("the image cache holds %v", got)
			}
		})
	}
	t.Run("TamperedLayer", func(t *testing.T) {
		evil := filepath.Join(t.TempDir(), "evil")
		if err := os.MkdirAll(filepath.Join(evil, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(evil, "etc", "motd"), "nobody was here\n", 0o644, 0, 0)
		tampered, _ := runtimetest.TamperOCILayout(t, layout, evil)
		bobs := filepath.Join(mkdir(t, filepath.Join(dir, "nobody-tampered"), 0o755, nobody, nobody), "img")
		cpTree(t, tampered, bobs, nobody, nobody)
		cache, err := start(t, bobs)
		if !errors.Is(err, image.ErrDigest) {
			t.Fatalf("nobody's layout with his own layer under the genuine name: %v; want %v", err, image.ErrDigest)
		}
		if got, _ := filepath.Glob(filepath.Join(cache, "*", "rootfs")); len(got) > 0 {
			t.Errorf("the image cache holds %v", got)
		}
	})
	t.Run("OwnLayout", func(t *testing.T) {
		own := filepath.Join(mkdir(t, filepath.Join(dir, "nobody-own"), 0o755, nobody, nobody), "img")
		cpTree(t, layout, own, nobody, nobody)
		cache, err := start(t, own)
		if err != nil && strings.Contains(err.Error(), "image") {
			t.Fatalf("nobody's own layout: %v", err)
		}
		if got, _ := filepath.Glob(filepath.Join(cache, "*", "rootfs")); len(got) != 1 {
			t.Errorf("the image cache holds %v, want nobody's image", got)
		}
	})
}

// cpTree copies the tree src to dst, owned by uid:gid.
func cpTree(t *testing.T, src, dst string, uid, gid int) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	handTo(t, uid, gid, dst)
}
