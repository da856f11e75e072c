package image_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/nodelet/asuser"
	"github.com/troupe-hpc/troupe/nodelet/image"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// The attacker's tests: bob is nobody, alice a uid with no passwd entry.
const (
	bob   = 65534
	alice = 4242
)

var bobCred = asuser.Cred{UID: bob, GID: bob, Groups: []int{bob}}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: opening files as another user (and chown) needs root")
	}
}

// tree writes files (path → content) into a new directory.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rootfs")
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// give hands p (recursively) to uid and makes every directory above it
// searchable, as a user's home would be.
func give(t *testing.T, p string, uid int) {
	t.Helper()
	for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
	id := strconv.Itoa(uid)
	if out, err := exec.Command("chown", "-R", "-h", id+":"+id, p).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
}

// genuine is the catalog's image content; evil bob's.
var (
	genuineFiles = map[string]string{"etc/motd": "genuine\n", "bin/tool": strings.Repeat("genuine tool ", 20000)}
	evilFiles    = map[string]string{"etc/motd": "bob was here\n", "bin/evil": "#!/bin/sh\necho pwned\n"}
)

func motd(t *testing.T, rootfs string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rootfs, "etc", "motd"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cacheEmpty: nothing in the cache, not even a staging directory.
func cacheEmpty(t *testing.T, s *image.Store) {
	t.Helper()
	ents, err := os.ReadDir(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("cache holds %s after a refused image", e.Name())
	}
}

// TestTamperedLayerRefused: bob copies the catalog image's layout
// (index.json, manifest and config genuine) with his own layer under the
// genuine layer's file name, as a layout, an OCI archive and a docker
// archive. Unpacking his fails with ErrDigest and leaves nothing in the
// cache; the catalog image, unpacked next, is the genuine one.
func TestTamperedLayerRefused(t *testing.T) {
	needRoot(t)
	_, catalog, _ := runtimetest.BuildOCI(t, tree(t, genuineFiles))
	evil := tree(t, evilFiles)
	evilLayout, _ := runtimetest.TamperOCILayout(t, catalog, evil)
	give(t, evilLayout, bob)
	evilOCIArchive := filepath.Join(filepath.Dir(evilLayout), "evil-oci.tar")
	tarUp(t, evilLayout, evilOCIArchive)
	genuineDocker, _, _ := runtimetest.BuildOCI(t, tree(t, genuineFiles))
	evilDocker := tamperDocker(t, genuineDocker, evil)
	give(t, evilOCIArchive, bob)
	give(t, evilDocker, bob)

	for _, ref := range []string{evilLayout, evilOCIArchive, evilDocker} {
		t.Run(filepath.Base(ref), func(t *testing.T) {
			s, err := image.NewStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if got, err := s.Rootfs(ref, asuser.Opener(bobCred)); !errors.Is(err, image.ErrDigest) {
				t.Fatalf("bob's tampered image: rootfs %q, err %v; want %v", got, err, image.ErrDigest)
			}
			cacheEmpty(t, s)
			for _, genuine := range []string{catalog, genuineDocker} {
				rootfs, err := s.Rootfs(genuine, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got := motd(t, rootfs); got != "genuine\n" {
					t.Errorf("the catalog image %s after bob's: /etc/motd = %q", genuine, got)
				}
				if _, err := os.Lstat(filepath.Join(rootfs, "bin", "evil")); err == nil {
					t.Errorf("the catalog image %s holds bob's /bin/evil", genuine)
				}
			}
		})
	}

	// The catalog images first, then bob's: his manifest and config name
	// an entry in the cache, which he gets only with layers that match.
	for _, ref := range []string{evilLayout, evilOCIArchive, evilDocker} {
		t.Run("CatalogFirst-"+filepath.Base(ref), func(t *testing.T) {
			s, err := image.NewStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for _, genuine := range []string{catalog, genuineDocker} {
				if _, err := s.Rootfs(genuine, nil); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := s.Rootfs(ref, asuser.Opener(bobCred)); !errors.Is(err, image.ErrDigest) {
				t.Fatalf("bob's tampered image: rootfs %q, err %v; want %v", got, err, image.ErrDigest)
			}
		})
	}

	// bob's own copy of the genuine layout, read as bob, is the catalog's
	// image: one entry for both.
	t.Run("GenuineCopyShares", func(t *testing.T) {
		s, _ := image.NewStore(t.TempDir())
		own := filepath.Join(t.TempDir(), "own")
		if out, err := exec.Command("cp", "-a", catalog, own).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		give(t, own, bob)
		a, err := s.Rootfs(own, asuser.Opener(bobCred))
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Rootfs(catalog, nil)
		if err != nil || a != b || motd(t, b) != "genuine\n" {
			t.Errorf("bob's genuine copy at %s, the catalog's at %s (%v): want one entry", a, b, err)
		}
		// Again: a hit, his blobs checked (or remembered) again.
		if c, err := s.Rootfs(own, asuser.Opener(bobCred)); err != nil || c != a {
			t.Errorf("bob's genuine copy again: %s, %v; want %s", c, err, a)
		}
	})
}

// TestCacheHitNeedsTheLayers: alice unpacked her private image; bob has
// its index.json, manifest and config (they name the cache entry) but
// not its layer. Whether he has no layer blob or one of his own under its
// name, he does not get her rootfs.
func TestCacheHitNeedsTheLayers(t *testing.T) {
	needRoot(t)
	_, private, _ := runtimetest.BuildOCI(t, tree(t, map[string]string{"etc/motd": "alice's secret\n"}))
	aliceDir := filepath.Join(t.TempDir(), "alice")
	if out, err := exec.Command("cp", "-a", private, aliceDir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	give(t, aliceDir, alice)
	s, err := image.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	aliceCred := asuser.Cred{UID: alice, GID: alice, Groups: []int{alice}}
	if _, err := s.Rootfs(aliceDir, asuser.Opener(aliceCred)); err != nil {
		t.Fatal(err)
	}
	evil, layer := runtimetest.TamperOCILayout(t, private, tree(t, evilFiles))
	give(t, evil, bob)
	if got, err := s.Rootfs(evil, asuser.Opener(bobCred)); !errors.Is(err, image.ErrDigest) {
		t.Errorf("bob's layout with his own layer: rootfs %q, err %v; want %v", got, err, image.ErrDigest)
	}
	must(t, os.Remove(layer))
	if got, err := s.Rootfs(evil, asuser.Opener(bobCred)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bob's layout without a layer: rootfs %q, err %v; want %v", got, err, os.ErrNotExist)
	}
}

// tarUp writes the tree at dir into a tar at dst.
func tarUp(t *testing.T, dir, dst string) {
	t.Helper()
	if out, err := exec.Command("sh", "-c", `cd "$1" && tar -cf "$2" *`, "sh", dir, dst).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
}

// tamperDocker is a copy of a docker archive with manifest.json and the
// config kept, its first layer replaced by a tar of rootfs.
func tamperDocker(t *testing.T, genuine, rootfs string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "docker")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-C", dir, "-xf", genuine).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m []struct{ Layers []string }
	if err := json.Unmarshal(b, &m); err != nil || len(m) == 0 || len(m[0].Layers) == 0 {
		t.Fatalf("manifest.json: %v: %s", err, b)
	}
	layer := filepath.Join(dir, m[0].Layers[0])
	cmd := `tar -C "$1" -cf - . | gzip -c > "$2"`
	if out, err := exec.Command("sh", "-c", cmd, "sh", rootfs, layer).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	out := filepath.Join(filepath.Dir(dir), "evil-docker.tar")
	tarUp(t, dir, out)
	return out
}

// TestTamperedSIFPartition: bob's SIF has the catalog SIF's header (ID,
// times, descriptors) and his own squashfs in its partition. It gets an
// entry of its own, and the catalog SIF unpacked after it is genuine.
func TestTamperedSIFPartition(t *testing.T) {
	needRoot(t)
	catalog := runtimetest.BuildSIF(t, tree(t, genuineFiles))
	evil := runtimetest.TamperSIF(t, catalog, tree(t, evilFiles))
	give(t, evil, bob)
	s, err := image.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bobs, err := s.Rootfs(evil, nil)
	if err != nil {
		t.Fatal(err)
	}
	genuine, err := s.Rootfs(catalog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := motd(t, genuine); got != "genuine\n" || bobs == genuine {
		t.Errorf("the catalog SIF after bob's: /etc/motd = %q, entry %s (bob's %s)", got, genuine, bobs)
	}
	if got := motd(t, bobs); got != "bob was here\n" {
		t.Errorf("bob's SIF: /etc/motd = %q, want his own", got)
	}
	// Again, now from the memo, and through the admin's symbolic link to
	// it: the same answers.
	link := filepath.Join(t.TempDir(), "current.sif")
	must(t, os.Symlink(catalog, link))
	for _, ref := range []string{catalog, link} {
		again, err := s.Rootfs(ref, nil)
		if err != nil || again != genuine {
			t.Errorf("the catalog SIF again as %s: %s, %v; want %s", ref, again, err, genuine)
		}
	}
}

// TestLayoutSymlinkRefused: bob's layout names alice's private layer
// (he knows its digest), reached through a symbolic link (the blob, the
// blobs directory, index.json) or a hard link made for him. Read as
// bob, each is refused, and nothing of alice's reaches the cache.
func TestLayoutSymlinkRefused(t *testing.T) {
	needRoot(t)
	_, private, _ := runtimetest.BuildOCI(t, tree(t, map[string]string{"etc/motd": "alice's secret\n"}))
	home := filepath.Join(t.TempDir(), "alice")
	if out, err := exec.Command("cp", "-a", private, home).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	give(t, home, alice)
	if out, err := exec.Command("chmod", "-R", "go-rwx", home).CombinedOutput(); err != nil {
		t.Fatalf("chmod: %v: %s", err, out)
	}
	blobs, _ := filepath.Glob(filepath.Join(home, "blobs", "sha256", "*"))

	tests := []struct {
		name string
		make func(layout string)
		want error
	}{
		{"BlobSymlink", func(l string) { relinkBlobs(t, l, home, os.Symlink) }, asuser.ErrSymlink},
		{"BlobHardlink", func(l string) { relinkBlobs(t, l, home, os.Link) }, os.ErrPermission},
		{"BlobsDirSymlink", func(l string) {
			must(t, os.RemoveAll(filepath.Join(l, "blobs")))
			must(t, os.Symlink(filepath.Join(home, "blobs"), filepath.Join(l, "blobs")))
		}, asuser.ErrSymlink},
		{"IndexSymlink", func(l string) {
			must(t, os.Remove(filepath.Join(l, "index.json")))
			must(t, os.Symlink(filepath.Join(home, "index.json"), filepath.Join(l, "index.json")))
		}, asuser.ErrSymlink},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			layout := filepath.Join(t.TempDir(), "bob")
			if out, err := exec.Command("cp", "-a", private, layout).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, out)
			}
			give(t, layout, bob)
			tc.make(layout)
			s, err := image.NewStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Rootfs(layout, asuser.Opener(bobCred))
			if !errors.Is(err, tc.want) {
				t.Fatalf("bob's layout: rootfs %q, err %v; want %v", got, err, tc.want)
			}
			cacheEmpty(t, s)
		})
	}
	if len(blobs) < 3 {
		t.Fatalf("alice's layout has %d blobs", len(blobs))
	}
}

// relinkBlobs replaces every blob of layout with a link (link: os.Symlink
// or os.Link) to alice's blob of the same name in home.
func relinkBlobs(t *testing.T, layout, home string, link func(oldname, newname string) error) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(layout, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := filepath.Join(layout, "blobs", "sha256", e.Name())
		must(t, os.Remove(p))
		must(t, link(filepath.Join(home, "blobs", "sha256", e.Name()), p))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestArchiveSymlinks: an archive is unpacked into a private copy whose
// own symbolic links are followed only while they stay inside it: a
// docker archive whose layer is a link to another entry (as `docker
// save` writes a layer that appears twice) unpacks; one whose layer
// links to a file of the host's is refused.
func TestArchiveSymlinks(t *testing.T) {
	needRoot(t)
	genuine, _, _ := runtimetest.BuildOCI(t, tree(t, genuineFiles))
	secret := filepath.Join(t.TempDir(), "secret.tar")
	must(t, os.WriteFile(secret, []byte("root's"), 0o600))
	for _, tc := range []struct {
		name   string
		target func(dir, layer string) string // the link's target, made in dir
		ok     bool
	}{
		{"Inside", func(dir, layer string) string {
			must(t, os.MkdirAll(filepath.Join(dir, "other"), 0o755))
			must(t, os.Rename(layer, filepath.Join(dir, "other", "layer.tar")))
			rel, _ := filepath.Rel(filepath.Dir(layer), filepath.Join(dir, "other", "layer.tar"))
			return rel
		}, true},
		{"Outside", func(dir, layer string) string { return secret }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "docker")
			must(t, os.Mkdir(dir, 0o755))
			if out, err := exec.Command("tar", "-C", dir, "-xf", genuine).CombinedOutput(); err != nil {
				t.Fatalf("tar: %v: %s", err, out)
			}
			b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
			must(t, err)
			var m []struct{ Layers []string }
			must(t, json.Unmarshal(b, &m))
			layer := filepath.Join(dir, m[0].Layers[0])
			target := tc.target(dir, layer)
			_ = os.Remove(layer)
			must(t, os.Symlink(target, layer))
			archive := filepath.Join(filepath.Dir(dir), "linked.tar")
			tarUp(t, dir, archive)
			s, err := image.NewStore(t.TempDir())
			must(t, err)
			rootfs, err := s.Rootfs(archive, nil)
			if tc.ok {
				if err != nil || motd(t, rootfs) != "genuine\n" {
					t.Errorf("rootfs %q, err %v; want the genuine image", rootfs, err)
				}
				return
			}
			if !errors.Is(err, image.ErrEscape) {
				t.Errorf("rootfs %q, err %v; want %v", rootfs, err, image.ErrEscape)
			}
			cacheEmpty(t, s)
		})
	}
}

// TestArchiveMemo: an archive read and checked once is not read again
// while it is unchanged; rewritten in place (the same inode) with a
// tampered layer, it is read again and refused, whatever the memo held.
func TestArchiveMemo(t *testing.T) {
	needRoot(t)
	defer image.SetMemoMargin(-time.Hour)() // the test's own files count as old
	genuine, _, _ := runtimetest.BuildOCI(t, tree(t, genuineFiles))
	own := filepath.Join(t.TempDir(), "own.tar")
	if out, err := exec.Command("cp", genuine, own).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	give(t, own, bob)
	s, err := image.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Rootfs(own, asuser.Opener(bobCred))
	if err != nil {
		t.Fatal(err)
	}
	// Remembered: a start reads none of it. Shown with the cache made
	// read-only (a bind mount, which binds root too): reading the
	// archive would need a staging directory there.
	must(t, unix.Mount(s.Dir(), s.Dir(), "", unix.MS_BIND, ""))
	must(t, unix.Mount("", s.Dir(), "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""))
	again, err := s.Rootfs(own, asuser.Opener(bobCred))
	must(t, unix.Unmount(s.Dir(), 0))
	if err != nil || again != first {
		t.Errorf("the same archive again: %s, %v; want %s from the memo", again, err, first)
	}

	evil, err := os.ReadFile(tamperDocker(t, genuine, tree(t, evilFiles)))
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(own, evil, 0o644)) // truncated and rewritten: the same inode
	if got, err := s.Rootfs(own, asuser.Opener(bobCred)); !errors.Is(err, image.ErrDigest) {
		t.Errorf("the archive rewritten in place: rootfs %q, err %v; want %v", got, err, image.ErrDigest)
	}
}
