package e2e

import (
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

// TestMountTargetThroughImageLink attacks as nobody with a rootfs of
// nobody's own holding a symbolic link /x -> /.troupe/bin, and a mount
// of nobody's script at /x/troupe-init. The target, checked by name
// only, passed, runc followed the link, and the script ran as the
// container's first process with the root-owned exit file as its
// descriptor 3: it wrote the exit status it liked (0 for a command that
// exits 7), and as much as it liked into the node's run directory. Now
// the node resolves the target inside the image and the job fails before
// anything runs, with the reason; a target through a link to anywhere
// else is mounted where the link leads. So is a mount above where the
// image leads /.troupe, when it has no room for the node's layer.
func TestMountTargetThroughImageLink(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 1, "2")
	base := searchable(t)
	image := filepath.Join(base, "nobody-rootfs")
	if out, err := exec.Command("cp", "-a", runtimetest.BusyboxRootfs(t), image).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	for _, l := range [][2]string{{"/.troupe/bin", "x"}, {"/mnt/scratch", "s"}} {
		if err := os.Symlink(l[0], filepath.Join(image, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(image, "mnt", "scratch"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", "-h", "65534:65534", image).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	dir := dirOf(t, nobodyUser, 0o755, base, "nobody-jobs")
	evil := filepath.Join(dir, "evil")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\necho I am pid $$\necho 0 >&3\nhead -c 1000000 /dev/zero >&3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := dirOf(t, nobodyUser, 0o755, dir, "data")
	if err := os.WriteFile(filepath.Join(data, "hello"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(data, "hello"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	job := func(command, src, target string) string {
		return fmt.Sprintf(`
job "p" {
  resources {
    cpu    = 0.5
    memory = "64MiB"
  }
  image   = %q
  command = ["sh", "-c", %q]
  mount "evil" {
    source   = %q
    target   = %q
    readonly = true
  }
  output = "p-%%j.out"
}`, image, command, src, target)
	}
	run := func(hcl string) (api.Job, string) {
		t.Helper()
		id, _ := c.submitAs(nobodyUser.uid, nobodyUser.gid, dir, "p", hcl)
		j := c.waitState(id, time.Minute, func(j api.Job) bool { return j.State.Terminal() })
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("p-%d.out", j.ID)))
		return j, string(b)
	}

	j, out := run(job("echo the job ran; exit 7", evil, "/x/troupe-init"))
	want := `mount "evil": mount target refused: target /x/troupe-init leads to /.troupe/bin/troupe-init in the container`
	if j.State != api.JobFailed || !strings.Contains(j.Reason, want) {
		t.Errorf("job %d: %s (%s), output %q; want FAILED with %q", j.ID, j.State, j.Reason, out, want)
	}
	if strings.Contains(out, "pid") || strings.Contains(out, "the job ran") {
		t.Errorf("something ran: %q", out)
	}

	// Without the node's layer (its /etc a link) and with /.troupe
	// leading to /opt/t, runc mounts troupe-init at
	// /opt/t/bin/troupe-init: a mount at /opt would hide it.
	moved := filepath.Join(base, "nobody-moved")
	if out, err := exec.Command("cp", "-a", runtimetest.BusyboxRootfs(t), moved).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(moved, "private", "opt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(moved, "etc"), filepath.Join(moved, "private", "etc")); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"private/etc", "etc"}, {"/opt/t", ".troupe"}, {"private/opt", "opt"}} {
		if err := os.Symlink(l[0], filepath.Join(moved, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("chown", "-R", "-h", "65534:65534", moved).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	cover := dirOf(t, nobodyUser, 0o755, dir, "cover", "t", "bin")
	if err := os.Link(evil, filepath.Join(cover, "troupe-init")); err != nil {
		t.Fatal(err)
	}
	image = moved
	j, out = run(job("echo the job ran; exit 7", filepath.Join(dir, "cover"), "/opt"))
	want = `mount "evil": mount target refused: target /opt leads to /private/opt in the container (its symbolic links followed), which holds /private/opt/t`
	if j.State != api.JobFailed || !strings.Contains(j.Reason, want) {
		t.Errorf("job %d: %s (%s), output %q; want FAILED with %q", j.ID, j.State, j.Reason, out, want)
	}
	if strings.Contains(out, "pid") || strings.Contains(out, "the job ran") {
		t.Errorf("something ran: %q", out)
	}

	image = filepath.Join(base, "nobody-rootfs")
	j, out = run(job("cat /s/data/hello /mnt/scratch/data/hello", data, "/s/data"))
	if j.State != api.JobCompleted || out != "hello\nhello\n" {
		t.Errorf("a mount through the image's link elsewhere: job %d %s (%s), output %q", j.ID, j.State, j.Reason, out)
	}
}
