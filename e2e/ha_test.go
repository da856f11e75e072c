package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// haCluster is three schedd peers (raft over TCP) and one nodelet
// (ha-n1, the process runtime) with clients over https through the
// list of the three.
type haCluster struct {
	dir    string
	cmds   []*exec.Cmd
	leader int            // the peer that led when the admin token was made
	cli    *client.Client // an admin's client of the three
}

// startHA starts an haCluster.
func startHA(t *testing.T) haCluster {
	t.Helper()
	dir := t.TempDir()
	cert, key, err := auth.SelfSigned(filepath.Join(dir, "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	join := filepath.Join(dir, "join-token")
	if _, err := auth.JoinToken(join); err != nil {
		t.Fatal(err)
	}
	const n = 3
	var apis, rafts, peers []string
	for i := range n {
		apis = append(apis, freeport.Addr(t))
		rafts = append(rafts, freeport.Addr(t))
		peers = append(peers, fmt.Sprintf("s%d=%s", i+1, rafts[i]))
	}
	cmds := make([]*exec.Cmd, n)
	socks := make([]string, n)
	var urls []string
	for i := range n {
		urls = append(urls, "https://"+apis[i])
		cmds[i], socks[i] = startPlain(t, filepath.Join(dir, fmt.Sprint("s", i+1)), "--listen", apis[i],
			"--tls-cert", cert, "--tls-key", key, "--join-token-file", join,
			"--raft-addr", rafts[i], "--peers", strings.Join(peers, ","), "--node-timeout", "10s")
	}
	ctx := context.Background()
	// The leader's socket issues the admin token (followers answer 503).
	var secret string
	leader := eventually.Value(t, 20*time.Second, "a leader issuing the admin token", func() (int, bool) {
		for i, s := range socks {
			c, _ := client.New(s)
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			tok, err := c.CreateToken(cctx, api.TokenCreate{User: "root", Admin: true})
			cancel()
			if err == nil {
				secret = tok.Secret
				return i, true
			}
		}
		return -1, false
	})
	list := strings.Join(urls, ",")
	cli, err := client.NewWith(list, client.Options{CA: cert, Token: secret})
	if err != nil {
		t.Fatal(err)
	}

	nl := exec.Command(bin+"/nodelet", "--addr", list, "--ca", cert, "--join-token-file", join, "--name", "ha-n1",
		"--state-dir", filepath.Join(dir, "n1"), "--runtime", "process", "--cpu", "4", "--memory", "4GiB", "--heartbeat", "500ms")
	nl.Env = append(os.Environ(), "TROUPE_TOKEN=", "TROUPE_CA=")
	nl.Stderr = os.Stderr
	if err := nl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nl.Process.Signal(syscall.SIGTERM); _ = nl.Wait() })
	return haCluster{dir: dir, cmds: cmds, leader: leader, cli: cli}
}

// TestHALeaderFailover: three schedd peers (raft over TCP), one nodelet
// and a stream of submissions over https through TROUPE_ADDR's list of
// the three. The leader is killed with SIGKILL mid-stream: a new one
// takes writes within 5s, the clients retry on their own, every
// acknowledged job is there once, and no job runs twice.
func TestHALeaderFailover(t *testing.T) {
	h := startHA(t)
	dir, cmds, leader, cli := h.dir, h.cmds, h.leader, h.cli
	ctx := context.Background()
	ran := filepath.Join(dir, "ran")
	spec := func(name string) jobspec.Job {
		return jobspec.Job{Name: name, Image: "host", Command: []string{"sh", "-c", "echo $LSB_JOBID >> " + ran},
			Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode}, Resources: jobspec.Resources{CPU: 1, Memory: 32 << 20}}
	}
	const workers, total, killAt = 4, 300, 100
	var (
		mu      sync.Mutex
		acked   = map[uint64]string{}
		ackedAt []time.Time
		failed  int
		killed  time.Time
		wg      sync.WaitGroup
	)
	next := make(chan int)
	go func() {
		for i := range total {
			next <- i
		}
		close(next)
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := "ha-" + strconv.Itoa(i)
				start := time.Now()
				res, err := cli.Submit(ctx, api.SubmitRequest{Cwd: dir, Spec: wire.ToAPI(spec(name))})
				mu.Lock()
				if err != nil {
					failed++
					t.Logf("submit %s: %v", name, err)
				} else {
					if _, dup := acked[res.JobID]; dup {
						t.Errorf("job %d acknowledged twice (%s and %s)", res.JobID, acked[res.JobID], name)
					}
					acked[res.JobID] = name
					if !killed.IsZero() && start.After(killed) {
						ackedAt = append(ackedAt, time.Now())
					}
					if len(acked) == killAt {
						killed = time.Now()
						_ = cmds[leader].Process.Signal(syscall.SIGKILL)
						t.Logf("SIGKILL to the leader s%d after %d acknowledged submissions", leader+1, killAt)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	_ = cmds[leader].Wait()
	var failover time.Duration
	for _, at := range ackedAt {
		if d := at.Sub(killed); failover == 0 || d < failover {
			failover = d
		}
	}
	t.Logf("failover: the first submission sent after the SIGKILL was acknowledged %v after it; %d acknowledged, %d failed", failover, len(acked), failed)
	if failover <= 0 || failover > 5*time.Second {
		t.Errorf("no write acknowledged within 5s of killing the leader (%v)", failover)
	}
	if failed > 0 {
		t.Errorf("%d submissions failed: the clients should have retried", failed)
	}

	// Every acknowledged job, once; every one runs to the end once.
	var jl api.JobList
	eventually.NoError(t, 90*time.Second, "every job ended", func() error {
		var err error
		jl, err = cli.Jobs(ctx, 0, 0)
		done := 0
		for _, j := range jl.Jobs {
			if j.State.Terminal() {
				done++
			}
		}
		if err != nil || done != len(jl.Jobs) {
			return fmt.Errorf("%d of %d ended (%v)", done, len(jl.Jobs), err)
		}
		return nil
	})
	byName := map[string]int{}
	for _, j := range jl.Jobs {
		byName[j.Name]++
	}
	for id, name := range acked {
		if byName[name] != 1 {
			t.Errorf("acknowledged job %d (%s) is there %d times", id, name, byName[name])
		}
	}
	for _, j := range jl.Jobs {
		if _, ok := acked[j.ID]; ok && j.State != api.JobCompleted {
			t.Errorf("job %d ended %s (%s)", j.ID, j.State, j.Reason)
		}
	}
	b, _ := os.ReadFile(ran)
	seen := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		seen[l]++
	}
	for id, k := range seen {
		if k > 1 {
			t.Errorf("job %s ran %d times", id, k)
		}
	}
	for id := range acked {
		if seen[strconv.FormatUint(id, 10)] != 1 {
			t.Errorf("acknowledged job %d ran %d times, want once", id, seen[strconv.FormatUint(id, 10)])
		}
	}
}

// TestHAJoin: a second schedd enters a running one-peer cluster with
// --join; it receives the state, and a write sent to it reaches the
// leader (307, followed by the client).
func TestHAJoin(t *testing.T) {
	dir := t.TempDir()
	cert, key, err := auth.SelfSigned(filepath.Join(dir, "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	api1, api2, r1, r2 := freeport.Addr(t), freeport.Addr(t), freeport.Addr(t), freeport.Addr(t)
	_, sock1 := startPlain(t, filepath.Join(dir, "s1"), "--listen", api1, "--tls-cert", cert, "--tls-key", key,
		"--raft-addr", r1, "--peers", "s1="+r1)
	ctx := context.Background()
	c1, _ := client.New(sock1)
	var tok api.TokenCreated
	eventually.NoError(t, 10*time.Second, "s1 leading (issuing the admin token)", func() (err error) {
		tok, err = c1.CreateToken(ctx, api.TokenCreate{User: "root", Admin: true})
		return err
	})
	t.Setenv("TROUPE_TOKEN", tok.Secret)
	t.Setenv("TROUPE_CA", cert)
	_, sock2 := startPlain(t, filepath.Join(dir, "s2"), "--listen", api2, "--tls-cert", cert, "--tls-key", key,
		"--raft-addr", r2, "--join", "https://"+api1, "--id", "s2")
	c2, err := client.NewWith("https://"+api2, client.Options{CA: cert, Token: tok.Secret})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c2.Submit(ctx, api.SubmitRequest{Cwd: dir, Spec: wire.ToAPI(jobspec.Job{Name: "via-follower", Image: "host", Command: []string{"true"},
		Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode}, Resources: jobspec.Resources{CPU: 1, Memory: 32 << 20}})})
	if err != nil {
		t.Fatalf("submit through the joined follower: %v", err)
	}
	s2, _ := client.New(sock2)
	eventually.True(t, 15*time.Second, "the joined peer receiving the job", func() bool {
		j, _, err := s2.Job(ctx, res.JobID, 0, 0)
		return err == nil && j.Name == "via-follower"
	})
}
