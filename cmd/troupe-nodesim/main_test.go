package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/nodelet/nodesim"
	"github.com/troupe-hpc/troupe/sched"
)

// startSchedd runs a real schedd in this process: raft on disk, the
// scheduler loop, the accounting store, the /v1 API on a unix socket
// whose callers are who the kernel says and, when cfg has a join token,
// on a loopback TCP port whose callers are who their bearer token says
// (as cmd/schedd serves them). It returns the server, the socket's
// address and the TCP one ("" without a join token). wrap, if given,
// stands between the socket and schedd (a fault to inject).
func startSchedd(t *testing.T, cfg sched.Config, wrap ...func(http.Handler) http.Handler) (*sched.Server, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	cfg.DataDir = filepath.Join(dir, "raft")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.AccountingPath = filepath.Join(dir, "accounting.db")
	srv, err := sched.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "schedd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	h := srv.CatchUpGate(srv.Handler())
	for _, w := range wrap {
		h = w(h)
	}
	us := &http.Server{Handler: h, ConnContext: auth.PeerCreds(-1)}
	servers := []*http.Server{us}
	go func() { _ = us.Serve(ln) }()
	tcp := ""
	if cfg.JoinToken != "" {
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ts := &http.Server{Handler: srv.TCPHandler(false)}
		servers = append(servers, ts)
		go func() { _ = ts.Serve(tl) }()
		tcp = "http://" + tl.Addr().String()
	}
	loopDone := make(chan struct{})
	go func() { srv.Run(ctx); close(loopDone) }()
	t.Cleanup(func() {
		for _, hs := range servers {
			_ = hs.Close()
		}
		cancel()
		<-loopDone
		_ = srv.Close()
	})
	return srv, "unix://" + sock, tcp
}

// startSim runs troupe-nodesim's command line in this process until the
// test ends; it returns when every node has registered.
func startSim(t *testing.T, args ...string) *bytes.Buffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &stdout, &stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("troupe-nodesim exited %d: %s", code, stderr.String())
			}
		case <-time.After(60 * time.Second):
			t.Error("troupe-nodesim did not stop within 60s of its context's end")
		}
	})
	if !eventually.Within(2*time.Minute, func() bool {
		select {
		case code := <-done:
			t.Fatalf("troupe-nodesim exited %d before registering: %s", code, stderr.String())
		default:
		}
		return strings.Contains(stdout.String(), "nodes registered in")
	}) {
		t.Fatalf("the simulated nodes did not register within 2m:\n%s", stderr.String())
	}
	return &stderr.Buffer
}

// syncBuffer is a bytes.Buffer safe to write and read from two
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

// simJob is a job of size containers (multi-node when more than one),
// each pretending to run for run, exiting with code.
func simJob(name string, size int, run time.Duration, code int) api.SubmitRequest {
	mode := jobspec.ModeSingleNode
	if size > 1 {
		mode = jobspec.ModeMultiNode
	}
	env := map[string]string{nodesim.EnvDuration: run.String()}
	if code != 0 {
		env[nodesim.EnvExit] = fmt.Sprint(code)
	}
	return api.SubmitRequest{Cwd: "/tmp", User: "root", Spec: wire.ToAPI(jobspec.Job{Name: name, Image: "host",
		Command: []string{"true"}, Env: env, Cluster: jobspec.Cluster{Size: size, Mode: mode},
		Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30}})}
}

// TestSimulatedClusterDrivesScheduler: 50 simulated nodes register with
// a real schedd, which schedules 200 one-container jobs and four gangs
// of 8 containers on them; the nodes run them as nodelet would (reports
// preparing, running, exited), every job ends COMPLETED, and each leaves
// the replicated state for the accounting store, where GET /v1/history
// finds it. A job asking to exit 3 ends FAILED with that code, and one
// with a malformed TROUPE_SIM_DURATION fails naming the variable.
func TestSimulatedClusterDrivesScheduler(t *testing.T) {
	// Ended jobs leave the state for the accounting store after 1s.
	srv, addr, _ := startSchedd(t, sched.Config{KeepEnded: time.Second, ExportEvery: 200 * time.Millisecond})
	startSim(t, "--addr", addr, "--nodes", "50", "--cpu", "4", "--memory", "16GiB")
	if n := len(srv.Store().Snapshot().Nodes()); n != 50 {
		t.Fatalf("schedd holds %d nodes, want 50", n)
	}
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := map[uint64]api.JobState{}
	gangs := map[uint64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	submit := func(req api.SubmitRequest, state api.JobState) {
		defer wg.Done()
		res, err := c.Submit(ctx, req)
		if err != nil {
			t.Errorf("submitting %s: %v", req.Spec.Name, err)
			return
		}
		mu.Lock()
		want[res.JobID] = state
		if req.Spec.Cluster.Size > 1 {
			gangs[res.JobID] = true
		}
		mu.Unlock()
	}
	for w := range 8 { // 200 one-container jobs from 8 submitters
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				wg.Add(1)
				submit(simJob(fmt.Sprintf("one-%d-%d", w, i), 1, 100*time.Millisecond, 0), api.JobCompleted)
			}
		}()
	}
	for i := range 4 {
		wg.Add(1)
		go submit(simJob(fmt.Sprintf("gang-%d", i), 8, 300*time.Millisecond, 0), api.JobCompleted)
	}
	wg.Add(2)
	go submit(simJob("exit3", 1, 0, 3), api.JobFailed)
	bad := simJob("bad-duration", 1, 0, 0)
	bad.Spec.Env[nodesim.EnvDuration] = "soon"
	go submit(bad, api.JobFailed)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Every job ends as wanted and, KeepEnded later, lives in the
	// accounting store only.
	var hist api.History
	eventually.NoError(t, 3*time.Minute, "every job in the history and none in the state", func() error {
		hist, err = c.History(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		inState := 0
		for _, j := range srv.Store().Snapshot().Jobs() {
			if _, ok := want[j.ID]; ok {
				inState++
			}
		}
		if len(hist.Jobs) < len(want) || inState > 0 {
			return fmt.Errorf("%d of %d jobs in the history, %d still in the state", len(hist.Jobs), len(want), inState)
		}
		return nil
	})
	got := map[uint64]api.HistoryJob{}
	for _, j := range hist.Jobs {
		got[j.ID] = j
	}
	for id, st := range want {
		j, ok := got[id]
		switch {
		case !ok:
			t.Errorf("job %d not in the history", id)
		case j.State != st:
			t.Errorf("job %d (%s) ended %s (%s), want %s", id, j.Name, j.State, j.Reason, st)
		case j.Name == "exit3" && j.ExitCode != 3:
			t.Errorf("job exit3 ended with code %d, want 3", j.ExitCode)
		case j.Name == "bad-duration" && !strings.Contains(j.Reason, nodesim.EnvDuration):
			t.Errorf("job bad-duration's reason %q does not name %s", j.Reason, nodesim.EnvDuration)
		case gangs[id] && len(j.Containers) != 8:
			t.Errorf("gang %d ran %d containers, want 8", id, len(j.Containers))
		case gangs[id] && len(j.Nodes) < 2:
			t.Errorf("gang %d of 8 one-core containers ran on %v: 4-core nodes hold 4 each", id, j.Nodes)
		}
	}
	if len(gangs) != 4 {
		t.Errorf("%d gangs submitted, want 4", len(gangs))
	}
}

// TestJoinTokenAndPartitionLabels: simulated nodes register over TCP
// with the cluster's join token, as nodelets on other machines do, and
// then act with the credential each got; their --partition-labels put
// them in the partition that selects that label, and a job of that
// partition with no TROUPE_SIM_DURATION runs for --duration and ends
// COMPLETED on one of them.
func TestJoinTokenAndPartitionLabels(t *testing.T) {
	dir := t.TempDir()
	parts := filepath.Join(dir, "partitions.hcl")
	if err := os.WriteFile(parts, []byte(`
default_partition = "batch"
partition "batch" {
  nodes = ["login*"]
}
partition "simulated" {
  labels = ["simlab"]
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	join := auth.NewSecret()
	joinFile := filepath.Join(dir, "join-token")
	if err := os.WriteFile(joinFile, []byte(join+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, sock, tcp := startSchedd(t, sched.Config{JoinToken: join, PartitionsFile: parts})
	t.Setenv(client.EnvToken, "") // the nodes hold no token but the join token
	startSim(t, "--addr", tcp, "--nodes", "12", "--prefix", "lab", "--cpu", "2", "--memory", "4GiB",
		"--join-token-file", joinFile, "--partition-labels", "simlab, other", "--duration", "200ms")

	creds := 0
	for _, tok := range srv.Store().Snapshot().Tokens() {
		if strings.HasPrefix(tok.Node, "lab") {
			creds++
		}
	}
	if creds != 12 {
		t.Errorf("%d node credentials issued, want one per node (12)", creds)
	}
	c, err := client.New(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pl, err := c.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pl.Partitions {
		want := 0
		if p.Name == "simulated" {
			want = 12
		}
		if len(p.Nodes) != want || (want > 0 && p.Nodes[0] != "lab01") {
			t.Errorf("partition %s holds nodes %v, want %d (lab01…lab12)", p.Name, p.Nodes, want)
		}
	}
	req := simJob("labelled", 1, 0, 0)
	req.Spec.Env = nil
	req.Spec.Partition = "simulated"
	res, err := c.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	j := eventually.Value(t, time.Minute, "the job ending", func() (api.Job, bool) {
		j, _, err := c.Job(ctx, res.JobID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return j, j.State.Terminal()
	})
	if j.State != api.JobCompleted || !strings.HasPrefix(j.Containers[0].Node, "lab") {
		t.Fatalf("job ended %s (%s) on %q, want COMPLETED on a lab node", j.State, j.Reason, j.Containers[0].Node)
	}
	if took := j.Ended.Sub(j.Submitted); took < 200*time.Millisecond {
		t.Errorf("job ended %s after its submission, before its --duration (200ms) could pass", took)
	}
}

// TestBadFlagsNamed: a bad option is refused with exit status 2 and a
// message naming the flag.
func TestBadFlagsNamed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "0"}, "--nodes"},
		{[]string{"--cpu", "-1"}, "--cpu"},
		{[]string{"--memory", "lots"}, "--memory"},
		{[]string{"--memory", "0"}, "--memory"},
		{[]string{"--gpus", "-2"}, "--gpus"},
		{[]string{"--duration", "-1s"}, "--duration"},
		{[]string{"--register-concurrency", "0"}, "--register-concurrency"},
		{[]string{"--join-token-file", filepath.Join(t.TempDir(), "missing")}, "--join-token-file"},
		{[]string{"extra"}, `"extra"`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"--addr", "unix:///nonexistent"}, c.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and a message naming %s", c.args, code, stderr.String(), c.want)
		}
	}
}

// TestLeaseLostFences: a node that gets no answer from schedd for longer
// than its lease stops its containers, as nodelet's fence does, and says
// so when schedd answers again: the job ends FAILED, its reason the
// fence's. The node is cut off (every node request refused) for 13 s:
// past its 10 s lease, short of the 20 s after which schedd would mark
// it DOWN.
func TestLeaseLostFences(t *testing.T) {
	var cut atomic.Bool
	refuse := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if cut.Load() && strings.HasPrefix(r.URL.Path, "/v1/nodes/") {
				http.Error(w, "cut off by the test", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	_, addr, _ := startSchedd(t, sched.Config{NodeTimeout: 20 * time.Second}, refuse)
	startSim(t, "--addr", addr, "--nodes", "1")
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.Submit(ctx, simJob("fenced", 1, time.Hour, 0))
	if err != nil {
		t.Fatal(err)
	}
	wait := func(limit time.Duration, ok func(api.Job) bool) api.Job {
		t.Helper()
		return eventually.Value(t, limit, fmt.Sprintf("job %d's state", res.JobID), func() (api.Job, bool) {
			j, _, err := c.Job(ctx, res.JobID, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			return j, ok(j)
		})
	}
	wait(time.Minute, func(j api.Job) bool { return j.State == api.JobRunning })
	cut.Store(true)
	// Cut off past the lease: the duration is the test, not a wait.
	time.Sleep(13 * time.Second)
	if j, _, err := c.Job(ctx, res.JobID, 0, 0); err != nil || j.State != api.JobRunning {
		t.Fatalf("while the node was cut off the job became %s (%v); schedd cannot have heard of a fence", j.State, err)
	}
	cut.Store(false)
	j := wait(time.Minute, func(j api.Job) bool { return j.State.Terminal() })
	if j.State != api.JobFailed || !strings.Contains(j.Reason, "fence") {
		t.Fatalf("job ended %s (%s), want FAILED by the node's fence", j.State, j.Reason)
	}
}
