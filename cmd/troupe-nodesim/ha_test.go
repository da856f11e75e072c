package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/freeport"
	"github.com/troupe-hpc/troupe/sched"
	"github.com/troupe-hpc/troupe/sched/raftlog"
)

// startPeers runs n schedd raft peers in this process (raft over mutual
// TLS on loopback, each API on an httptest server that trusts anonymous
// callers, as --insecure-tcp does) and returns them and their API URLs.
func startPeers(t *testing.T, n int) ([]*sched.Server, []string) {
	t.Helper()
	dir := t.TempDir()
	cert, key, err := auth.SelfSigned(filepath.Join(dir, "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := raftlog.PeerTLS("", cert, key)
	if err != nil {
		t.Fatal(err)
	}
	var peers []raftlog.Peer
	for i := range n {
		peers = append(peers, raftlog.Peer{ID: fmt.Sprint("s", i+1), Addr: freeport.Addr(t)})
	}
	var srvs []*sched.Server
	var urls []string
	for _, p := range peers {
		var h atomic.Pointer[http.Handler]
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.Load()).ServeHTTP(w, r) }))
		ctx, cancel := context.WithCancel(context.Background())
		srv, err := sched.Open(ctx, sched.Config{DataDir: filepath.Join(dir, p.ID), APIAddr: hs.URL,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), KeepEnded: time.Hour,
			Raft: raftlog.Config{ID: p.ID, Bind: p.Addr, Peers: peers, TLS: tc, LogOutput: io.Discard}})
		if err != nil {
			t.Fatal(err)
		}
		th := srv.TCPHandler(true)
		h.Store(&th)
		done := make(chan struct{})
		go func() { srv.Run(ctx); close(done) }()
		t.Cleanup(func() {
			hs.Close()
			cancel()
			<-done
			_ = srv.Close()
		})
		srvs, urls = append(srvs, srv), append(urls, hs.URL)
	}
	return srvs, urls
}

// TestSimFollowsLeader: simulated nodes given the list of an HA schedd's
// three peers, the leader last, register, heartbeat, take their
// assignments and report through the leader, as nodelet does (a
// follower redirects the nodes' endpoints to it): every node is in every
// peer's state, and jobs submitted to the leader run on them and end
// COMPLETED.
func TestSimFollowsLeader(t *testing.T) {
	srvs, urls := startPeers(t, 3)
	leader := eventually.Value(t, 30*time.Second, "a leader among the 3 peers", func() (int, bool) {
		for i, s := range srvs {
			if s.IsLeader() {
				return i, true
			}
		}
		return -1, false
	})
	var list []string
	for i, u := range urls {
		if i != leader {
			list = append(list, u)
		}
	}
	list = append(list, urls[leader])
	const nodes, jobs = 12, 24
	startSim(t, "--addr", strings.Join(list, ","), "--nodes", fmt.Sprint(nodes), "--cpu", "2", "--memory", "4GiB")
	eventually.NoError(t, 30*time.Second, fmt.Sprintf("every peer holding the %d nodes", nodes), func() error {
		for i, s := range srvs {
			if n := len(s.Store().Snapshot().Nodes()); n != nodes {
				return fmt.Errorf("peer s%d holds %d nodes", i+1, n)
			}
		}
		return nil
	})
	ctx := context.Background()
	var ids []uint64
	for i := range jobs {
		res, err := srvs[leader].Submit(ctx, simJob(fmt.Sprint("ha-", i), 1, 100*time.Millisecond, 0))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.JobID)
	}
	eventually.NoError(t, 60*time.Second, "every job COMPLETED", func() error {
		v := srvs[leader].Store().Snapshot()
		for _, id := range ids {
			if j := v.Job(id); j == nil {
				return fmt.Errorf("job %d is missing", id)
			} else if j.State != api.JobCompleted {
				return fmt.Errorf("job %d is %s %s", id, j.State, j.Reason)
			}
		}
		return nil
	})
}
