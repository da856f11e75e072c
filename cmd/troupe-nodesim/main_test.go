package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/nodelet/nodesim"
	"github.com/troupe-hpc/troupe/sched"
)

// startSchedd runs a real schedd in this process: raft on disk, the
// scheduler loop, the accounting store, the /v1 API on a unix socket
// whose callers are who the kernel says (as cmd/schedd serves it). Ended
// jobs leave the state for the accounting store after keepEnded.
func startSchedd(t *testing.T, keepEnded time.Duration) (*sched.Server, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	srv, err := sched.Open(ctx, sched.Config{DataDir: filepath.Join(dir, "raft"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		KeepEnded: keepEnded, ExportEvery: 200 * time.Millisecond, AccountingPath: filepath.Join(dir, "accounting.db")})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "schedd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.CatchUpGate(srv.Handler()), ConnContext: auth.PeerCreds(-1)}
	go func() { _ = hs.Serve(ln) }()
	loopDone := make(chan struct{})
	go func() { srv.Run(ctx); close(loopDone) }()
	t.Cleanup(func() {
		_ = hs.Close()
		cancel()
		<-loopDone
		_ = srv.Close()
	})
	return srv, "unix://" + sock
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
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(stdout.String(), "nodes registered in") {
		select {
		case code := <-done:
			t.Fatalf("troupe-nodesim exited %d before registering: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the simulated nodes did not register within 2m:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
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
	return api.SubmitRequest{Cwd: "/tmp", User: "root", Spec: jobspec.Job{Name: name, Image: "host",
		Command: []string{"true"}, Env: env, Cluster: jobspec.Cluster{Size: size, Mode: mode},
		Resources: jobspec.Resources{CPU: 1, Memory: 1 << 30}}}
}

// TestSimulatedClusterDrivesScheduler: 50 simulated nodes register with
// a real schedd, which schedules 200 one-container jobs and four gangs
// of 8 containers on them; the nodes run them as nodelet would (reports
// preparing, running, exited), every job ends COMPLETED, and each leaves
// the replicated state for the accounting store, where GET /v1/history
// finds it. A job asking to exit 3 ends FAILED with that code, and one
// with a malformed TROUPE_SIM_DURATION fails naming the variable.
func TestSimulatedClusterDrivesScheduler(t *testing.T) {
	srv, addr := startSchedd(t, time.Second)
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
	deadline := time.Now().Add(3 * time.Minute)
	for {
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
		if len(hist.Jobs) >= len(want) && inState == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 3m: %d of %d jobs in the history, %d still in the state", len(hist.Jobs), len(want), inState)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
