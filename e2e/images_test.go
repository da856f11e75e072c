package e2e

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// TestImageCacheTampering: nobody (bob) copies the catalog's images and
// swaps their content under genuine metadata: an OCI layout with his own
// layer under the genuine layer's file name, a SIF with the genuine
// header and his own squashfs partition; and a layout whose blobs are
// symbolic links to troupe-alice's private copy. His tampered layout
// fails with a digest error, his linked layout with a symbolic-link
// refusal, and his SIF runs his own content only; troupe-alice's jobs of
// the catalog images, run after his on the same node, see the genuine
// /etc/motd and no /bin/evil; his layout, tried again once the catalog's
// image is in the cache, still fails on his layer.
func TestImageCacheTampering(t *testing.T) {
	needRunc(t)
	alice := aliceUser(t)
	base := searchable(t)
	genuine := runtimetest.BusyboxRootfs(t)
	writeTree(t, genuine, "etc/motd", "genuine\n")
	pad := make([]byte, 1<<20) // incompressible: bob's squashfs fits in the partition
	_, _ = rand.Read(pad)
	writeTree(t, genuine, "etc/pad", string(pad))
	evil := runtimetest.BusyboxRootfs(t)
	writeTree(t, evil, "etc/motd", "bob was here\n")
	writeTree(t, evil, "bin/evil", "#!/bin/sh\necho pwned\n")

	catalogSIF := runtimetest.BuildSIF(t, genuine)
	_, catalogOCI, _ := runtimetest.BuildOCI(t, genuine)
	bob := dirOf(t, nobodyUser, 0o755, base, "bob")
	evilLayout, _ := runtimetest.TamperOCILayout(t, catalogOCI, evil)
	bobLayout := copyAs(t, evilLayout, filepath.Join(bob, "evil"), nobodyUser)
	bobSIF := copyAs(t, runtimetest.TamperSIF(t, catalogSIF, evil), filepath.Join(bob, "evil.sif"), nobodyUser)
	// alice's private copy of an image, and bob's layout linking to it.
	home := dirOf(t, alice, 0o700, base, "alice")
	alicePrivate := copyAs(t, catalogOCI, filepath.Join(home, "img"), alice)
	bobLinks := copyAs(t, catalogOCI, filepath.Join(bob, "links"), nobodyUser)
	blobs, _ := filepath.Glob(filepath.Join(bobLinks, "blobs", "sha256", "*"))
	for _, b := range blobs {
		if err := os.Remove(b); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(alicePrivate, "blobs", "sha256", filepath.Base(b)), b); err != nil {
			t.Fatal(err)
		}
	}

	etc := t.TempDir()
	images := filepath.Join(etc, "images.hcl")
	if err := os.WriteFile(images, fmt.Appendf(nil, "image \"genuine-sif\" {\n  source = %q\n}\nimage \"genuine-oci\" {\n  source = %q\n}\n",
		catalogSIF, catalogOCI), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(etc, "nodelet.hcl")
	if err := os.WriteFile(conf, []byte("images = \"images.hcl\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TROUPE_NODELET_CONFIG", conf)
	c := startCluster(t, 1, "2", "--images", images)

	run := func(t *testing.T, u e2eUser, image string) (api.Job, string) {
		t.Helper()
		dir := dirOf(t, u, 0o755, base, u.name+"-"+strings.ReplaceAll(t.Name(), "/", "-"))
		hcl := fmt.Sprintf(`
job "img" {
  resources {
    cpu    = 0.5
    memory = "64MiB"
  }
  image   = %q
  command = ["sh", "-c", "cat /etc/motd; test -e /bin/evil && echo EVIL; true"]
  output  = "i-%%j.out"
}`, image)
		id, _ := c.submitAs(u.uid, u.gid, dir, "img", hcl)
		j := c.waitState(id, 2*time.Minute, func(j api.Job) bool { return j.State.Terminal() })
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("i-%d.out", id)))
		return j, string(b)
	}
	reason := func(j api.Job) string {
		s := j.Reason
		for _, ct := range j.Containers {
			s += " " + ct.Message
		}
		return s
	}

	tampered := func(t *testing.T) {
		j, out := run(t, nobodyUser, bobLayout)
		if j.State != api.JobFailed || !strings.Contains(reason(j), "does not match its digest") || !strings.Contains(reason(j), bobLayout) {
			t.Errorf("job %d %s (%s), output %q; want FAILED with a digest error naming %s", j.ID, j.State, reason(j), out, bobLayout)
		}
		if strings.Contains(out, "bob was here") || strings.Contains(out, "genuine") {
			t.Errorf("bob's layout ran: %q", out)
		}
	}
	t.Run("BobTamperedLayout", tampered)
	t.Run("BobLinksAlicesBlobs", func(t *testing.T) {
		j, out := run(t, nobodyUser, bobLinks)
		if j.State != api.JobFailed || !strings.Contains(reason(j), "symbolic link") {
			t.Errorf("job %d %s (%s), output %q; want FAILED with a symbolic link refusal", j.ID, j.State, reason(j), out)
		}
	})
	t.Run("BobTamperedSIF", func(t *testing.T) {
		j, out := run(t, nobodyUser, bobSIF)
		if j.State != api.JobCompleted || out != "bob was here\nEVIL\n" {
			t.Errorf("job %d %s (%s), output %q; want bob's own image to run as his", j.ID, j.State, reason(j), out)
		}
	})
	for _, name := range []string{"genuine-oci", "genuine-sif"} {
		t.Run("AliceAfterBob-"+name, func(t *testing.T) {
			j, out := run(t, alice, name)
			if j.State != api.JobCompleted || out != "genuine\n" {
				t.Errorf("alice's job %d of %s: %s (%s), output %q; want the genuine /etc/motd and no /bin/evil", j.ID, name, j.State, reason(j), out)
			}
		})
	}
	// The catalog's entry is in the cache now: bob's layout, whose
	// manifest names it, still fails on his layer.
	t.Run("BobTamperedLayoutAgain", tampered)
}

// writeTree writes content at rel under root.
func writeTree(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// copyAs copies src to dst, owned by u, and returns dst.
func copyAs(t *testing.T, src, dst string, u e2eUser) string {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if out, err := exec.Command("chown", "-R", "-h", fmt.Sprintf("%d:%d", u.uid, u.gid), dst).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	return dst
}
