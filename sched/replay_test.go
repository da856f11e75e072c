package sched

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/freeport"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/raftlog"
)

// haPeer is one schedd peer of an in-process HA cluster: raft over mutual
// TLS on loopback, its TCP API (anonymous callers trusted, as with
// --insecure-tcp) on an httptest server.
type haPeer struct {
	srv    *Server
	hs     *httptest.Server
	h      atomic.Pointer[http.Handler]
	cancel context.CancelFunc
	done   chan struct{}
}

func (p *haPeer) stop() {
	p.cancel()
	<-p.done
	p.srv.Close()
	p.hs.Close()
}

// A follower restarted (stopped and started on its data dir) with many
// jobs on disk never answers with fewer: while it replays, GET /v1/jobs
// is redirected to the leader (followed by the client); once it has
// applied what it had on disk it answers from its own state. The jobs
// written while it was down reach it promptly (raft's replication
// back-off does not hold it up).
func TestRestartedFollowerAnswersInFull(t *testing.T) {
	dir := t.TempDir()
	// One certificate for all, made once.
	if _, _, err := auth.SelfSigned(filepath.Join(dir, "tls"), nil); err != nil {
		t.Fatal(err)
	}
	var peers []raftlog.Peer
	for i := range 3 {
		peers = append(peers, raftlog.Peer{ID: fmt.Sprint("s", i+1), Addr: freeport.Addr(t)})
	}
	ps := make([]*haPeer, 3)
	for i, p := range peers {
		ps[i] = startPeerShared(t, dir, p.ID, peers, p.Addr)
	}
	defer func() {
		for _, p := range ps {
			if p != nil {
				p.stop()
			}
		}
	}()
	leader := eventually.Value(t, 15*time.Second, "a leader with its config", func() (int, bool) {
		for i, p := range ps {
			if p.srv.IsLeader() && p.srv.Store().Snapshot().Config().Partition("default") != nil {
				return i, true
			}
		}
		return -1, false
	})
	ctx := context.Background()
	job := jobspec.Job{Name: "r", Image: "host", Command: []string{"true"}, Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 1, Memory: 1 << 20}}
	const before, during = 400, 100
	for range before {
		if _, err := ps[leader].srv.Submit(ctx, api.SubmitRequest{User: "u", Spec: wire.ToAPI(job)}); err != nil {
			t.Fatal(err)
		}
	}
	f := (leader + 1) % 3
	eventually.True(t, 10*time.Second, fmt.Sprintf("the follower holding the %d jobs", before),
		func() bool { return len(ps[f].srv.Store().Snapshot().Jobs()) >= before })
	// Stop it; the leader goes on (its replication to it fails and backs
	// off meanwhile), then the follower starts again on its data dir.
	ps[f].stop()
	ps[f] = nil
	for range during {
		if _, err := ps[leader].srv.Submit(ctx, api.SubmitRequest{User: "u", Spec: wire.ToAPI(job)}); err != nil {
			t.Fatal(err)
		}
	}
	// Down for a while: long enough for the leader's replication to it
	// to back off, which the restart must not wait out.
	time.Sleep(3 * time.Second)
	start := time.Now()
	ps[f] = startPeerShared(t, dir, peers[f].ID, peers, peers[f].Addr)
	opened := time.Since(start)
	// Every answer lists at least the jobs it had on disk; its own state
	// (not a redirect) is served once it has applied them, and the jobs
	// written while it was down arrive without raft's failure back-off.
	var own, full time.Duration
	answers := 0
	for full == 0 {
		res, err := http.Get(ps[f].hs.URL + "/v1/jobs")
		if err != nil {
			t.Fatal(err)
		}
		var list api.JobList
		err = json.NewDecoder(res.Body).Decode(&list)
		res.Body.Close()
		redirected := res.Request.URL.Host != ps[f].hs.Listener.Addr().String()
		switch {
		case res.StatusCode == http.StatusServiceUnavailable:
			// No leader known yet: a refusal with Retry-After, not a queue.
		case err != nil || res.StatusCode != http.StatusOK:
			t.Fatalf("GET /v1/jobs: %d %v", res.StatusCode, err)
		case len(list.Jobs) < before:
			a, d := ps[f].srv.raft.Replay()
			t.Fatalf("answer %d of the restarted follower lists %d jobs, fewer than the %d it had on disk (redirected %v, replayed %d of %d)",
				answers+1, len(list.Jobs), before, redirected, a, d)
		default:
			answers++
			if !redirected && own == 0 {
				own = time.Since(start)
			}
			if !redirected && len(list.Jobs) == before+during {
				full = time.Since(start)
			}
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the restarted follower has not caught up in 30s (own state served after %v)", own)
		}
		time.Sleep(10 * time.Millisecond) // the next sample of a timing
	}
	t.Logf("restarted follower: open took %v; its own state served %v after the restart, all %d jobs %v after it (%d answers, none short)",
		opened.Round(time.Millisecond), own.Round(time.Millisecond), before+during, full.Round(time.Millisecond), answers)
}

// startPeerShared starts a peer whose certificate is dir/tls's.
func startPeerShared(t *testing.T, dir, id string, peers []raftlog.Peer, bind string) *haPeer {
	t.Helper()
	tc, err := raftlog.PeerTLS("", filepath.Join(dir, "tls", "cert.pem"), filepath.Join(dir, "tls", "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	p := &haPeer{done: make(chan struct{})}
	p.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*p.h.Load()).ServeHTTP(w, r) }))
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.srv, err = Open(ctx, Config{DataDir: filepath.Join(dir, id), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), APIAddr: p.hs.URL,
		Raft: raftlog.Config{ID: id, Bind: bind, Peers: peers, TLS: tc, LogOutput: io.Discard}})
	if err != nil {
		t.Fatal(err)
	}
	h := p.srv.TCPHandler(true)
	p.h.Store(&h)
	go func() { p.srv.Run(ctx); close(p.done) }()
	return p
}
