package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/freeport"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

var badminOnce sync.Once

// badmin builds cmd/badmin next to the other binaries (TestMain does not).
func badmin(t *testing.T) string {
	t.Helper()
	badminOnce.Do(func() {
		cmd := exec.Command("go", "build", "-o", bin+"/", "../cmd/badmin")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building badmin: %v\n%s", err, out)
		}
	})
	return bin + "/badmin"
}

// startPlain starts a schedd (not --dev) with args and returns it and its
// unix address; the test's cleanup stops it.
func startPlain(t *testing.T, dir string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin+"/schedd", append([]string{"--data-dir", dir, "--socket", filepath.Join(dir, "schedd.sock")}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	select {
	case a := <-scanAddr(out):
		return cmd, a
	case <-time.After(60 * time.Second):
		t.Fatal("schedd did not start in 60s")
	}
	return nil, ""
}

func runEnv(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestTLSTokens: schedd --listen with a self-signed certificate; badmin
// issues tokens on the socket; bqueue reaches schedd over https with
// TROUPE_CA and TROUPE_TOKEN, and is refused without them or once the
// token is revoked; a real nodelet joins with the join token and runs a
// job with its own credential.
func TestTLSTokens(t *testing.T) {
	dir := t.TempDir()
	cert, key, err := auth.SelfSigned(filepath.Join(dir, "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tcp := freeport.Addr(t)
	join := filepath.Join(dir, "join-token")
	_, sock := startPlain(t, filepath.Join(dir, "s"), "--listen", tcp, "--tls-cert", cert, "--tls-key", key, "--join-token-file", join)
	if fi, err := os.Stat(join); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("join token file: %v %v, want mode 0600", fi, err)
	}
	ba := badmin(t)
	secret, err := runEnv(t, []string{"TROUPE_ADDR=" + sock}, ba, "token", "create", "--user", "root", "--admin")
	if err != nil {
		t.Fatalf("badmin token create: %v %s", err, secret)
	}
	secret = strings.TrimSpace(secret)
	https := "https://" + tcp
	ok := []string{"TROUPE_ADDR=" + https, "TROUPE_CA=" + cert, "TROUPE_TOKEN=" + secret}

	// A job, through the socket, for bqueue to show.
	c, err := client.New(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.Submit(ctx, api.SubmitRequest{Cwd: dir, Spec: wire.ToAPI(jobspec.Job{Name: "over-tls", Image: "host",
		Command: []string{"sh", "-c", "echo ran-$LSB_JOBID > " + filepath.Join(dir, "ran")}, Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 1, Memory: 64 << 20}})})
	if err != nil {
		t.Fatal(err)
	}
	out, err := runEnv(t, ok, bin+"/bqueue")
	if err != nil || !strings.Contains(out, "over-tls") {
		t.Fatalf("bqueue over https: %v\n%s", err, out)
	}
	if out, err := runEnv(t, []string{"TROUPE_ADDR=" + https, "TROUPE_TOKEN=" + secret, "TROUPE_CA="}, bin+"/bqueue"); err == nil || !strings.Contains(out, "certificate") {
		t.Fatalf("bqueue without the CA: %v\n%s; want a certificate error", err, out)
	}
	if out, err := runEnv(t, []string{"TROUPE_ADDR=" + https, "TROUPE_CA=" + cert, "TROUPE_TOKEN=", "HOME=" + dir}, bin+"/bqueue"); err == nil || !strings.Contains(out, "bearer token") {
		t.Fatalf("bqueue without a token: %v\n%s; want a 401 line", err, out)
	}
	// Plain http to the TLS port is refused too.
	if out, err := runEnv(t, []string{"TROUPE_ADDR=http://" + tcp, "TROUPE_TOKEN=" + secret}, bin+"/bqueue"); err == nil {
		t.Fatalf("bqueue over plain http: %s; want a refusal", out)
	}

	// A nodelet joins over TCP with the join token and the CA.
	nl := exec.Command(bin+"/nodelet", "--addr", https, "--ca", cert, "--join-token-file", join, "--name", "tls-n1",
		"--state-dir", filepath.Join(dir, "n1"), "--runtime", "process", "--cpu", "2", "--memory", "2GiB", "--heartbeat", "500ms")
	nl.Env = append(os.Environ(), "TROUPE_TOKEN=", "TROUPE_CA=")
	nl.Stderr = os.Stderr
	if err := nl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nl.Process.Signal(syscall.SIGTERM); _ = nl.Wait() })
	j := eventually.Value(t, 30*time.Second, "the job ending on the TLS nodelet", func() (api.Job, bool) {
		j, _, err := c.Job(ctx, res.JobID, 0, 0)
		return j, err == nil && j.State.Terminal()
	})
	if j.State != api.JobCompleted {
		t.Fatalf("the job ended %s (%s)", j.State, j.Reason)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ran")); !strings.Contains(string(b), "ran-") {
		t.Fatalf("job output %q", b)
	}
	nodes, _ := c.Nodes(ctx)
	if len(nodes.Nodes) != 1 || nodes.Nodes[0].Credential != "" {
		t.Fatalf("nodes: %+v (a credential must never be listed)", nodes.Nodes)
	}

	// Revoked: one clear line, exit 1.
	list, err := runEnv(t, []string{"TROUPE_ADDR=" + sock}, ba, "token", "list", "-o", "json")
	if err != nil {
		t.Fatal(err, list)
	}
	var id string
	for _, l := range strings.Split(list, "\"id\": \"")[1:] {
		if v, _, _ := strings.Cut(l, "\""); !strings.HasPrefix(v, "node-") {
			id = v
		}
	}
	if out, err := runEnv(t, []string{"TROUPE_ADDR=" + sock}, ba, "token", "revoke", id); err != nil {
		t.Fatal(err, out)
	}
	out, err = runEnv(t, ok, bin+"/bqueue")
	if err == nil || !strings.Contains(out, "revoked") || strings.Count(strings.TrimSpace(out), "\n") > 1 {
		t.Fatalf("bqueue with a revoked token: %v\n%s", err, out)
	}
}
