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
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// TestOtherUserCannotKillOrPeek: on the unix socket schedd knows callers by
// their peer credentials. A job root submitted cannot be killed by
// another uid running the real bkill; root's own bkill works.
func TestOtherUserCannotKillOrPeek(t *testing.T) {
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
	res, err := c.Submit(ctx, api.SubmitRequest{Cwd: dir, UID: 4242, User: "mallory", Spec: wire.ToAPI(jobspec.Job{Name: "mine", Image: "host",
		Command: []string{"sh", "-c", "echo secret-output; sleep 300"}, Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 1, Memory: 64 << 20}})})
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
	// Nor hold or release it: a second job, submitted held, waits
	// behind the first; uid 65534 may neither hold the one nor release
	// the other.
	res2, err := c.Submit(ctx, api.SubmitRequest{Cwd: dir, Hold: true, Spec: wire.ToAPI(jobspec.Job{Name: "later", Image: "host",
		Command: []string{"true"}, Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 1, Memory: 64 << 20}})})
	if err != nil {
		t.Fatal(err)
	}
	id2 := strconv.FormatUint(res2.JobID, 10)
	for _, argv := range [][]string{{"bhold", id}, {"brelease", id2}} {
		cmd := exec.Command(bin+"/"+argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "TROUPE_ADDR="+addr)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "permission denied") {
			t.Fatalf("%s as uid 65534: err %v, output %q; want a refusal", argv[0], err, out)
		}
	}
	if j, _, _ := c.Job(ctx, res2.JobID, 0, 0); j.State != api.JobHeld {
		t.Fatalf("the refused brelease changed job %s: %s", id2, j.State)
	}
	if j, _, _ := c.Job(ctx, res.JobID, 0, 0); j.State == api.JobHeld || j.State.Terminal() {
		t.Fatalf("the refused bhold changed job %s: %s", id, j.State)
	}
	// Its owner may: released, it waits for room; then cancelled.
	for _, argv := range [][]string{{"brelease", id2}, {"bhold", id2}, {"bkill", id2}} {
		cmd := exec.Command(bin+"/"+argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "TROUPE_ADDR="+addr)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("root's %s: %v %s", argv[0], err, out)
		}
	}
	// Nor peek into it: bpeek refuses, and the output file is the
	// owner's alone.
	outFile := filepath.Join(dir, "troupe-"+id+".main1.out")
	if !waitFor(30*time.Second, func() bool { b, _ := os.ReadFile(outFile); return len(b) > 0 }) {
		t.Fatal("the job wrote no output")
	}
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{bin + "/bpeek", id}, "only its owner or an admin may peek"},
		{[]string{"cat", outFile}, "Permission denied"},
	} {
		cmd = exec.Command(tc.argv[0], tc.argv[1:]...)
		cmd.Env = append(os.Environ(), "TROUPE_ADDR="+addr)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "secret-output") {
			t.Errorf("%s as uid 65534: err %v, output %q; want a refusal saying %q", filepath.Base(tc.argv[0]), err, out, tc.want)
		}
	}
	cmd = exec.Command(bin+"/bpeek", id)
	cmd.Env = append(os.Environ(), "TROUPE_ADDR="+addr)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "secret-output") {
		t.Errorf("root's bpeek: %v %q", err, out)
	}
	cmd = exec.Command(bin+"/bkill", id)
	cmd.Env = append(os.Environ(), "TROUPE_ADDR="+addr)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("root's bkill: %v %s", err, out)
	}
}

// waitFor polls cond until it holds or timeout passes, and tells which
// (eventually.Within; tests that fail at once on a timeout use
// eventually.True and its kin).
func waitFor(timeout time.Duration, cond func() bool) bool {
	return eventually.Within(timeout, cond)
}
