package python

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

// TestPythonReadYourWrites: three schedd peers (raft over TCP, https),
// one nodelet, and the Python client given one follower's address alone.
// Its writes go to the leader (the follower's redirect); its reads stay
// on the follower, which applies each write a moment after the leader
// answered it. Submit then get, submit then wait, hold then get, kill
// then get, each repeated: every read shows the write (tests/test_ha.py).
// The Go client (internal/client, under the CLIs, troupe-slurm and the
// nodelet) is held to the same on the same cluster.
func TestPythonReadYourWrites(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("SKIP: the Python client's tests need python3 (`make deps` installs it)")
	}
	if testing.Short() {
		t.Skip("SKIP: -short: builds schedd and nodelet and starts three peers")
	}
	bin := buildBins(t)
	dir, err := os.MkdirTemp("", "troupe-py-ha")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o755) // the jobs' output goes there
	cert, key, err := auth.SelfSigned(filepath.Join(dir, "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	join := filepath.Join(dir, "join-token")
	if _, err := auth.JoinToken(join); err != nil {
		t.Fatal(err)
	}
	const n = 3
	var apis, peers []string
	for i := range n {
		apis = append(apis, freeport.Addr(t))
		peers = append(peers, fmt.Sprintf("s%d=%s", i+1, freeport.Addr(t)))
	}
	var logs [n]syncBuffer
	socks := make([]string, n)
	for i := range n {
		d := filepath.Join(dir, fmt.Sprint("s", i+1))
		socks[i] = filepath.Join(d, "schedd.sock")
		raft, _ := strings.CutPrefix(peers[i], fmt.Sprintf("s%d=", i+1))
		cmd := exec.Command(bin+"/schedd", "--data-dir", d, "--socket", socks[i], "--listen", apis[i],
			"--tls-cert", cert, "--tls-key", key, "--join-token-file", join,
			"--raft-addr", raft, "--peers", strings.Join(peers, ","), "--node-timeout", "10s")
		cmd.Stderr = &logs[i]
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { // drained, so that schedd never blocks on it
			sc := bufio.NewScanner(out)
			for sc.Scan() {
			}
		}()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Errorf("schedd s%d did not stop within 30s of SIGTERM", i+1)
			}
			if t.Failed() {
				t.Logf("schedd s%d log:\n%s", i+1, logs[i].String())
			}
		}()
	}

	// The leader's socket issues the token (a follower answers 503).
	ctx := context.Background()
	var secret string
	leader := eventually.Value(t, 60*time.Second, "a leader issuing the admin token", func() (int, bool) {
		for i, s := range socks {
			c, err := client.New(s)
			if err != nil {
				t.Fatal(err)
			}
			c.SetTimeout(time.Second)
			if tok, err := c.CreateToken(ctx, api.TokenCreate{User: "root", Admin: true}); err == nil {
				secret = tok.Secret
				return i, true
			}
		}
		return -1, false
	})
	follower := (leader + 1) % n
	t.Logf("leader s%d, the client is given follower s%d (%s) alone", leader+1, follower+1, apis[follower])
	list := "https://" + strings.Join(apis, ",https://")
	nl := exec.Command(bin+"/nodelet", "--addr", list, "--ca", cert, "--join-token-file", join, "--name", "py-ha-n1",
		"--state-dir", filepath.Join(dir, "n1"), "--runtime", "process", "--cpu", "4", "--memory", "4GiB", "--heartbeat", "500ms")
	nl.Env = append(os.Environ(), "TROUPE_TOKEN=", "TROUPE_CA=")
	var nlog syncBuffer
	nl.Stderr = &nlog
	if err := nl.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = nl.Process.Signal(syscall.SIGTERM)
		_ = nl.Wait()
		if t.Failed() {
			t.Logf("nodelet log:\n%s", nlog.String())
		}
	}()

	t.Run("go", func(t *testing.T) { goReadYourWrites(t, "https://"+apis[follower], cert, secret, dir) })

	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-m", "unittest", "-v", "test_ha")
	cmd.Dir = filepath.Join(here, "tests")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+here, "PYTHONDONTWRITEBYTECODE=1",
		"TROUPE_TEST_FOLLOWER=https://"+apis[follower], "TROUPE_TEST_CWD="+dir,
		"TROUPE_CA="+cert, "TROUPE_TOKEN="+secret, "TROUPE_ADDR=")
	res, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest test_ha:\n%s", res)
	if err != nil {
		t.Fatalf("the Python client's read-your-writes tests failed: %v", err)
	}
	if strings.Contains(string(res), "skipped") {
		t.Fatal("the read-your-writes tests were skipped: TROUPE_TEST_FOLLOWER did not reach them")
	}
}

// goReadYourWrites: internal/client given the follower alone. A client
// whose write was redirected reads from the leader afterwards; a reader
// that stays on the follower is told the writer's index (SawWrite), as
// a program passes it on. Each round: submit (held), read the job and
// the list, kill, read again: never missing, never still HELD.
func goReadYourWrites(t *testing.T, follower, cert, secret, cwd string) {
	ctx := context.Background()
	spec := jobspec.Job{Name: "go-ryw", Image: "host", Command: []string{"true"},
		Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode}, Resources: jobspec.Resources{CPU: 0.1, Memory: 32 << 20}}
	dial := func() *client.Client {
		c, err := client.NewWith(follower, client.Options{CA: cert, Token: secret})
		if err != nil {
			t.Fatal(err)
		}
		c.SetTimeout(30 * time.Second)
		return c
	}
	w := dial()
	for i := range 8 {
		sub, err := w.Submit(ctx, api.SubmitRequest{Cwd: cwd, Spec: wire.ToAPI(spec), Hold: true})
		if err != nil {
			t.Fatalf("round %d: submit: %v", i, err)
		}
		if w.Written() < sub.Index || sub.Index == 0 {
			t.Fatalf("round %d: the client keeps index %d of its write, the answer carried %d", i, w.Written(), sub.Index)
		}
		r := dial()
		r.SawWrite(w.Written())
		if j, _, err := r.Job(ctx, sub.JobID, 0, 0); err != nil || j.State != api.JobHeld {
			t.Fatalf("round %d: job %d read after its submit: %s, %v", i, sub.JobID, j.State, err)
		}
		jl, err := r.Jobs(ctx, 0, 0)
		if err != nil || !slices.ContainsFunc(jl.Jobs, func(j api.Job) bool { return j.ID == sub.JobID }) {
			t.Fatalf("round %d: the job list read after the submit misses job %d (%v)", i, sub.JobID, err)
		}
		before := w.Written()
		if _, err := w.Kill(ctx, sub.JobID); err != nil {
			t.Fatalf("round %d: kill %d: %v", i, sub.JobID, err)
		}
		if w.Written() <= before {
			t.Fatalf("round %d: the kill's answer carried no later index (%d, before it %d)", i, w.Written(), before)
		}
		r.SawWrite(w.Written())
		if j, _, err := r.Job(ctx, sub.JobID, 0, 0); err != nil || j.State != api.JobCancelled {
			t.Fatalf("round %d: job %d read after its kill: %s, %v", i, sub.JobID, j.State, err)
		}
	}
}
