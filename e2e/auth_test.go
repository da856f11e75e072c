package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
)

// TestOtherUserCannotKill: on the unix socket schedd knows callers by
// their peer credentials. A job root submitted cannot be killed by
// another uid running the real bkill; root's own bkill works.
func TestOtherUserCannotKill(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run bkill as another uid")
	}
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755) // the other user reaches the socket
	}
	_, addr := startScheddArgs(t, dir, "--nodes", "1", "--node-cpu", "1", "--node-memory", "1GiB")
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.Submit(ctx, api.SubmitRequest{Cwd: dir, UID: 4242, User: "mallory", Spec: jobspec.Job{Name: "mine", Image: "host",
		Command: []string{"sleep", "300"}, Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 1, Memory: 64 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if j, _, _ := c.Job(ctx, res.JobID, 0, 0); j.UID != 0 {
		t.Fatalf("the job runs as uid %d; the peer (root) is uid 0, whatever the body says", j.UID)
	}
	id := strconv.FormatUint(res.JobID, 10)
	cmd := exec.Command(bin+"/bkill", id)
	cmd.Env = append(os.Environ(), "TROUPE_ADDR="+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "permission denied") {
		t.Fatalf("bkill as uid 65534: err %v, output %q; want a refusal", err, out)
	}
	if j, _, _ := c.Job(ctx, res.JobID, 0, 0); j.Cancelled || j.State.Terminal() {
		t.Fatalf("the refused bkill changed the job: %s", j.State)
	}
	cmd = exec.Command(bin+"/bkill", id)
	cmd.Env = append(os.Environ(), "TROUPE_ADDR="+addr)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("root's bkill: %v %s", err, out)
	}
}
