package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/nodelet"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// e2eUser is a real account on the host.
type e2eUser struct {
	name     string
	uid, gid uint32
}

var nobodyUser = e2eUser{"nobody", 65534, 65534}

// aliceUser creates (once) troupe-alice, a second non-root user.
func aliceUser(t *testing.T) e2eUser {
	t.Helper()
	if _, err := user.Lookup("troupe-alice"); err != nil {
		var out []byte
		for range 10 { // another test package may hold /etc/passwd's lock
			out, err = exec.Command("useradd", "--system", "--user-group", "--no-create-home",
				"--shell", "/usr/sbin/nologin", "troupe-alice").CombinedOutput()
			if err == nil || strings.Contains(string(out), "already exists") {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil && !strings.Contains(string(out), "already exists") {
			t.Skipf("SKIP: useradd troupe-alice (package passwd): %v: %s", err, out)
		}
	}
	u, err := user.Lookup("troupe-alice")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return e2eUser{u.Username, uint32(uid), uint32(gid)}
}

// dirOf makes a directory owned by u with mode, under a parent every
// user may search.
func dirOf(t *testing.T, u e2eUser, mode os.FileMode, elem ...string) string {
	t.Helper()
	p := filepath.Join(elem...)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, int(u.uid), int(u.gid)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// searchable is a temporary directory every user may search.
func searchable(t *testing.T) string {
	t.Helper()
	return tempDirMode(t, 0o755)
}

// tempDirMode is a t.TempDir that it and its parent have mode.
func tempDirMode(t *testing.T, mode os.FileMode) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// TestUserPaths runs jobs as two real non-root users (nobody and
// troupe-alice) that try to make the root nodelet write or read where they
// could not themselves: each is refused with a clear reason and nothing
// is created. And a job that writes past its partition's max_output is
// ended with the reason in bjob and its error file.
func TestUserPaths(t *testing.T) {
	needRunc(t)
	alice := aliceUser(t)
	rootfs := runtimetest.BusyboxRootfs(t)
	base := searchable(t)
	parts := filepath.Join(base, "partitions.hcl")
	if err := os.WriteFile(parts, []byte("partition \"all\" {\n  nodes = [\"*\"]\n  max_output = \"1MiB\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 1, "2", "--partitions", parts)

	// alice's: a private directory with a public-looking one inside, and
	// a rootfs of her own.
	private := dirOf(t, alice, 0o700, base, "alice-home")
	pub := dirOf(t, alice, 0o755, private, "pub")
	if err := os.WriteFile(filepath.Join(pub, "secret"), []byte("alice's secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	aliceRoot := filepath.Join(base, "alice-rootfs")
	if out, err := exec.Command("cp", "-a", rootfs, aliceRoot).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if out, err := exec.Command("chown", "-R", "-h", fmt.Sprintf("%d:%d", alice.uid, alice.gid), aliceRoot).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}

	job := func(image, command, extra string) string {
		return fmt.Sprintf(`
job "p" {
  resources {
    cpu    = 0.5
    memory = "64MiB"
  }
  image   = %q
  command = ["sh", "-c", %q]
  %s
}`, image, command, extra)
	}
	mount := func(src string) string {
		return fmt.Sprintf("mount \"pub\" {\n    source = %q\n    target = \"/data\"\n    readonly = true\n  }\n  output = \"p-%%j.out\"", src)
	}
	// run submits as u from a directory of u's own and waits for the end.
	run := func(t *testing.T, u e2eUser, hcl string) (api.Job, string) {
		t.Helper()
		dir := dirOf(t, u, 0o755, base, u.name+"-"+strings.ReplaceAll(t.Name(), "/", "-"))
		id, _ := c.submitAs(u.uid, u.gid, dir, "p", hcl)
		j := c.waitState(id, time.Minute, func(j api.Job) bool { return j.State.Terminal() })
		return j, dir
	}
	failed := func(t *testing.T, j api.Job, want string) {
		t.Helper()
		if j.State != api.JobFailed || !strings.Contains(j.Reason, want) {
			t.Errorf("job %d: %s (%s); want FAILED with %q", j.ID, j.State, j.Reason, want)
		}
	}
	absent := func(t *testing.T, p string) {
		t.Helper()
		if _, err := os.Lstat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was created", p)
		}
	}

	t.Run("OutputInEtc", func(t *testing.T) {
		j, _ := run(t, nobodyUser, job("host", "echo pwned", `output = "/etc/troupe-e2e-x-%j.out"`))
		p := fmt.Sprintf("/etc/troupe-e2e-x-%d.out", j.ID)
		failed(t, j, "output "+p+": "+fs.ErrPermission.Error())
		absent(t, p)
	})
	t.Run("ErrorInRoot", func(t *testing.T) {
		j, _ := run(t, nobodyUser, job("host", "echo pwned >&2", `error = "/root/troupe-e2e-y-%j.err"`))
		p := fmt.Sprintf("/root/troupe-e2e-y-%d.err", j.ID)
		failed(t, j, "error file "+p+": "+fs.ErrPermission.Error())
		absent(t, p)
	})
	t.Run("OutputThroughSymlinkedDir", func(t *testing.T) {
		dir := dirOf(t, nobodyUser, 0o755, base, "nobody-links")
		real := dirOf(t, nobodyUser, 0o755, dir, "real")
		if err := os.Symlink(real, filepath.Join(dir, "lnk")); err != nil {
			t.Fatal(err)
		}
		j, _ := run(t, nobodyUser, job("host", "echo hi", fmt.Sprintf(`output = "%s/lnk/x-%%j.out"`, dir)))
		failed(t, j, "symbolic link")
		absent(t, filepath.Join(real, fmt.Sprintf("x-%d.out", j.ID)))
	})
	t.Run("MountOfAnotherUsersPrivateDir", func(t *testing.T) {
		j, dir := run(t, nobodyUser, job("host", "cat /data/secret", mount(pub)))
		failed(t, j, `mount "pub": mount refused: source `+pub+": "+fs.ErrPermission.Error())
		if b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("p-%d.out", j.ID))); strings.Contains(string(b), "secret") {
			t.Errorf("nobody read alice's file: %q", b)
		}
		// alice may: it is hers.
		j, dir = run(t, alice, job("host", "cat /data/secret", mount(pub)))
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("p-%d.out", j.ID)))
		if j.State != api.JobCompleted || string(b) != "alice's secret\n" {
			t.Errorf("alice mounting her own directory: job %d %s (%s), output %q", j.ID, j.State, j.Reason, b)
		}
	})
	t.Run("ImageOfAnotherUser", func(t *testing.T) {
		for _, img := range []string{aliceRoot, "/etc", filepath.Join(private, "rootfs"), filepath.Join(base, "no-such-image")} {
			j, _ := run(t, nobodyUser, job(img, "echo ran", `output = "p-%j.out"`))
			failed(t, j, "image "+img+": "+nodelet.ErrImageRefused.Error())
			if strings.Contains(j.Reason, "runc") || strings.Contains(j.Reason, "no such file") {
				t.Errorf("the refusal tells whether %s exists: %s", img, j.Reason)
			}
		}
		if _, err := os.Lstat("/etc/nologin"); err == nil {
			t.Error("/etc/nologin exists")
		}
		j, dir := run(t, alice, job(aliceRoot, "echo ran in my rootfs", `output = "p-%j.out"`))
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("p-%d.out", j.ID)))
		if j.State != api.JobCompleted || string(b) != "ran in my rootfs\n" {
			t.Errorf("alice running her own rootfs: job %d %s (%s), output %q", j.ID, j.State, j.Reason, b)
		}
	})
	t.Run("MaxOutput", func(t *testing.T) {
		began := time.Now()
		j, dir := run(t, nobodyUser, job("host", "head -c 3000000 /dev/zero; sleep 300; echo survived", `output = "p-%j.out"`))
		out := filepath.Join(dir, fmt.Sprintf("p-%d.out", j.ID))
		want := "output file " + out + " passed the partition's max_output 1MiB"
		failed(t, j, want)
		b, _ := os.ReadFile(out)
		if !strings.HasSuffix(string(b), want+"; the job was killed\n") || strings.Contains(string(b), "survived") {
			t.Errorf("output file ends %q; want the reason at its end", b[max(0, len(b)-200):])
		}
		if took := time.Since(began); took > time.Minute {
			t.Errorf("the job ended after %s", took)
		}
	})
}
