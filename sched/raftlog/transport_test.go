package raftlog

import (
	"context"
	"crypto/tls"
	"io"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/sched/state"
)

// peerTLS makes a self-signed pair in dir (its own CA, as schedd's dev
// certificate) and the peers' TLS from it.
func peerTLS(t *testing.T, dir string) *tls.Config {
	t.Helper()
	cert, key, err := auth.SelfSigned(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := PeerTLS("", cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// openTCP opens a one-peer cluster over TCP on a free loopback port.
func openTCP(t *testing.T, dir string, tc *tls.Config) (*Log, *state.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := state.New()
	l, err := Open(ctx, Config{Dir: dir, ID: "s1", Bind: "127.0.0.1:0", TLS: tc, LogOutput: io.Discard}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.waitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return l, st
}

// rogueAppend is what an attacker who reaches --raft-addr sends: an
// AppendEntries from a "leader" of a much later term, carrying a submit
// right after the log's last entry and committing it.
func rogueAppend(t *testing.T, trans raft.Transport, l *Log) error {
	t.Helper()
	data, err := encodeCommand(state.Command{Time: time.Now(), Act: state.Submit{Jobs: []*state.Job{&state.Job{Name: "rogue", Containers: []state.Container{{KernelID: "k"}}}}}}, state.SchemaVersion)
	if err != nil {
		t.Fatal(err)
	}
	last := l.raft.LastIndex()
	lastTerm, _ := strconv.ParseUint(l.raft.Stats()["last_log_term"], 10, 64)
	term, _ := strconv.ParseUint(l.raft.Stats()["term"], 10, 64)
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("rogue"), Addr: []byte(trans.LocalAddr())},
		Term:      term + 100, PrevLogEntry: last, PrevLogTerm: lastTerm,
		Entries:           []*raft.Log{{Index: last + 1, Term: term + 100, Type: raft.LogCommand, Data: data}},
		LeaderCommitIndex: last + 1,
	}
	var resp raft.AppendEntriesResponse
	return trans.AppendEntries("s1", raft.ServerAddress(l.stream.Addr().String()), req, &resp)
}

func rogueJobs(st *state.Store) int {
	n := 0
	for _, j := range st.Snapshot().Jobs() {
		if j.Name == "rogue" {
			n++
		}
	}
	return n
}

// A peer reached by anyone on the network: a rogue without a certificate
// from the cluster CA (plain TCP, or TLS with its own CA) cannot append
// entries or change the term; the control shows the same rogue does on
// a peer in the clear (the transport before peers authenticated).
func TestRoguePeerRefused(t *testing.T) {
	rogueTLS := peerTLS(t, filepath.Join(t.TempDir(), "rogue"))
	rogues := map[string]func(t *testing.T) raft.Transport{
		"plain tcp": func(t *testing.T) raft.Transport {
			tt, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			return tt
		},
		"tls from another ca": func(t *testing.T) raft.Transport {
			sl, err := newStreamLayer("127.0.0.1:0", rogueTLS, "rogue", "", nil, io.Discard, nil)
			if err != nil {
				t.Fatal(err)
			}
			return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: sl, MaxPool: 1, Timeout: 2 * time.Second,
				Logger: hclog.NewNullLogger()})
		},
	}
	for name, mk := range rogues {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l, st := openTCP(t, filepath.Join(dir, "s1"), peerTLS(t, filepath.Join(dir, "tls")))
			submit(t, l, "real")
			term := l.raft.Stats()["term"]
			last := l.raft.LastIndex()
			trans := mk(t)
			defer trans.(io.Closer).Close()
			err := rogueAppend(t, trans, l)
			t.Logf("rogue AppendEntries: %v", err)
			if err == nil {
				t.Error("the rogue's AppendEntries was answered")
			}
			if got := l.raft.Stats()["term"]; got != term {
				t.Errorf("term moved %s → %s", term, got)
			}
			if !l.IsLeader() || l.raft.LastIndex() != last {
				t.Errorf("leader %v, last index %d → %d", l.IsLeader(), last, l.raft.LastIndex())
			}
			// Once a barrier is through, all the log held is applied:
			// the rogue's entry, had it been taken, would show now.
			if err := l.raft.Barrier(10 * time.Second).Error(); err != nil {
				t.Fatalf("barrier: %v", err)
			}
			if n := rogueJobs(st); n > 0 {
				t.Errorf("the rogue's submit was applied (%d jobs)", n)
			}
			if id := submit(t, l, "real"); id != 2 {
				t.Errorf("next job id %d, want 2", id)
			}
		})
	}
	t.Run("control: a peer in the clear", func(t *testing.T) {
		l, st := openTCP(t, t.TempDir(), nil)
		// The peer in the clear wants troupe's hello first: the rogue
		// says it, as anyone can.
		sl, err := newStreamLayer("127.0.0.1:0", nil, "rogue", "", nil, io.Discard, nil)
		if err != nil {
			t.Fatal(err)
		}
		nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: sl, MaxPool: 1, Timeout: 2 * time.Second, Logger: hclog.NewNullLogger()})
		defer nt.Close()
		// The peer may still append its own first entries as it takes
		// office, so the rogue's PrevLogEntry can miss: it tries again,
		// as a rogue would.
		for try := 0; try < 10 && rogueJobs(st) == 0; try++ {
			if err := rogueAppend(t, nt, l); err != nil {
				t.Fatalf("control rogue: %v", err)
			}
			eventually.Within(time.Second, func() bool { return rogueJobs(st) > 0 })
		}
		if rogueJobs(st) != 1 {
			t.Fatal("control: the rogue's entry was not applied on a peer in the clear; the test proves nothing")
		}
	})
}
