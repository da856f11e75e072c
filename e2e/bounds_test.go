package e2e

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/troupe-hpc/troupe/accounting"
	"github.com/troupe-hpc/troupe/internal/client"
)

// TestDevSecretsStayPrivate: root starts schedd --dev; then
//   - the accounting store's files (the database, its -wal and -shm),
//     which hold every user's ended jobs, are 0600;
//   - uid 65534, with a troupe token in its environment, submits a
//     script job with bsub: the job's env holds the rest of that
//     environment but not the token, and a job that names the token with
//     --env is refused;
//   - the token is in no file of the data dir (the raft log, its
//     snapshots, the accounting store).
func TestDevSecretsStayPrivate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root to run bsub as uid 65534")
	}
	base := t.TempDir()
	_ = os.Chmod(base, 0o755)
	data := filepath.Join(base, "data")
	if err := os.Mkdir(data, 0o711); err != nil {
		t.Fatal(err)
	}
	_, addr := startScheddArgs(t, data, "--nodes", "1", "--node-cpu", "1", "--node-memory", "1GiB")

	db := filepath.Join(data, accounting.FileName)
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatalf("after --dev started: %v", err)
		}
		if m := fi.Mode().Perm(); m != accounting.FileMode {
			t.Errorf("%s is %v, want %v: other local users could read every job's record", filepath.Base(f), m, accounting.FileMode)
		}
	}

	const secret = "tk-e2e-secret-4b1d"
	cwd := searchable(t)
	bsub := func(args ...string) (string, error) {
		cmd := exec.Command(bin+"/bsub", args...)
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), "TROUPE_ADDR="+addr, "TROUPE_TOKEN="+secret, "TROUPE_E2E_MARK=kept")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUser.uid, Gid: nobodyUser.gid}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := bsub("-H", "-J", "leak", "sh", "-c", "true")
	if err != nil {
		t.Fatalf("bsub as uid 65534: %v\n%s", err, out)
	}
	m := bsubJobID.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("bsub said %q", out)
	}
	id, _ := strconv.ParseUint(m[1], 10, 64)
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := c.Job(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if j.Spec.Env["TROUPE_E2E_MARK"] != "kept" {
		t.Fatalf("the job's env %v lacks the submitter's TROUPE_E2E_MARK: the environment was not copied at all", j.Spec.Env)
	}
	if _, ok := j.Spec.Env["TROUPE_TOKEN"]; ok {
		t.Fatalf("the job's env holds the submitter's TROUPE_TOKEN")
	}
	if out, err := bsub("-H", "--env", "TROUPE_TOKEN="+secret, "true"); err == nil || !strings.Contains(out, "TROUPE_TOKEN") {
		t.Fatalf("bsub --env TROUPE_TOKEN=…: %v\n%s", err, out)
	}

	err = filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("%s holds the submitter's token", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
