package raftlog

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/freeport"
	"github.com/troupe-hpc/troupe/sched/state"
)

func TestOldestRead(t *testing.T) {
	ids := []string{"s1", "s2", "s3"}
	for _, tt := range []struct {
		name string
		in   int
		told map[string]int
		want int
	}{
		{"every peer told", state.OldestSchema, map[string]int{"s2": state.SchemaVersion, "s3": state.SchemaVersion}, state.SchemaVersion},
		{"one told nothing", state.OldestSchema, map[string]int{"s2": state.SchemaVersion}, state.OldestSchema},
		{"one reads less", state.OldestSchema, map[string]int{"s2": state.SchemaVersion, "s3": state.OldestSchema}, state.OldestSchema},
		{"the state is in the newest", state.SchemaVersion, nil, state.SchemaVersion},
	} {
		if got := oldestRead(tt.in, ids, "s1", tt.told); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestLeaderWritesWhatEveryPeerReads: three peers, one of them a stand-in
// for the previous release (it tells no schema). While it is in the
// cluster the leader writes OldestSchema, which that release reads;
// once it is restarted as this release and tells its schema, the leader
// writes SchemaVersion, and keeps writing it when that peer is down
// again (the log holds entries of it already).
func TestLeaderWritesWhatEveryPeerReads(t *testing.T) {
	dir := t.TempDir()
	tc := peerTLS(t, filepath.Join(dir, "tls"))
	var peers []Peer
	for i := range 3 {
		peers = append(peers, Peer{ID: fmt.Sprint("s", i+1), Addr: freeport.Addr(t)})
	}
	openPeer := func(i int, silent bool) (*Log, *state.Store) {
		st := state.New()
		p := peers[i]
		l, err := openWith(context.Background(), Config{Dir: filepath.Join(dir, p.ID), ID: p.ID, Bind: p.Addr, Peers: peers, TLS: tc,
			API: "https://api-" + p.ID, LogOutput: io.Discard}, st, faults{silent: silent})
		if err != nil {
			t.Fatalf("peer %s: %v", p.ID, err)
		}
		return l, st
	}
	logs, sts := make([]*Log, 3), make([]*state.Store, 3)
	for i := range 3 {
		logs[i], sts[i] = openPeer(i, i == 2)
	}
	defer func() {
		for _, l := range logs {
			if l != nil {
				l.Close()
			}
		}
	}()
	leader := func() int {
		t.Helper()
		return eventually.Value(t, 10*time.Second, "a leader among the peers", func() (int, bool) {
			for i, l := range logs {
				if l != nil && l.IsLeader() {
					return i, true
				}
			}
			return -1, false
		})
	}
	// The stand-in must not lead: it runs this release's code.
	for i := leader(); i == 2; i = leader() {
		if err := logs[2].raft.LeadershipTransfer().Error(); err != nil {
			t.Logf("leadership transfer: %v", err)
		}
	}
	touch := func() {
		t.Helper()
		eventually.NoError(t, 10*time.Second, "a write through the leader", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := logs[leader()].Apply(ctx, state.Command{Time: time.Now(), Act: state.Touch{}})
			return err
		})
	}
	// Writes for longer than the others take to tell their schema: the
	// writes over that time are what is tested, not a wait.
	for end := time.Now().Add(3 * tellEvery); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		touch()
	}
	for i, st := range sts {
		if v := st.Snapshot().Schema(); v != state.OldestSchema {
			t.Fatalf("peer s%d applied entries of schema %d with a peer of the previous release in the cluster, want %d", i+1, v, state.OldestSchema)
		}
	}
	if v := logs[leader()].WriteSchema(); v != state.OldestSchema {
		t.Fatalf("the leader says it writes schema %d with a peer of the previous release in the cluster, want %d", v, state.OldestSchema)
	}
	// A kind the previous release does not know is not written: the
	// leader refuses it, and the caller falls back (the adoption
	// window's end: cancels).
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := logs[leader()].Apply(ctx, state.Command{Act: state.AdoptEnd{}, Time: time.Now()})
	cancel()
	if !errors.Is(err, ErrOlderPeer) {
		t.Fatalf("CmdAdoptEnd with a peer of the previous release: %v, want ErrOlderPeer", err)
	}
	// So is a reservation's act, new in the newest schema: it is not
	// written in a form the previous release would stop on.
	newAct := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := logs[leader()].Apply(ctx, state.Command{Time: time.Now(), Act: state.DeleteReservation{Name: "pm"}})
		return err
	}
	if err := newAct(); !errors.Is(err, ErrOlderPeer) {
		t.Fatalf("a reservation's act with a peer of the previous release in the cluster: %v, want ErrOlderPeer", err)
	}
	// Nor an act of suspension or warnings.
	if _, err := logs[leader()].Apply(context.Background(), state.Command{Time: time.Now(), Act: state.Warn{Jobs: []uint64{1}}}); !errors.Is(err, ErrOlderPeer) {
		t.Errorf("a warn act written for a peer of the previous release: %v, want ErrOlderPeer", err)
	}
	// The stand-in is upgraded: this release, which tells its schema.
	if err := logs[2].Close(); err != nil {
		t.Fatal(err)
	}
	logs[2], sts[2] = openPeer(2, false)
	eventually.NoError(t, 15*time.Second, "every peer in the newest schema once all are upgraded", func() error {
		touch()
		var in []int
		for _, st := range sts {
			if v := st.Snapshot().Schema(); v != state.SchemaVersion {
				in = append(in, v)
			}
		}
		if len(in) > 0 {
			return fmt.Errorf("peers still in schemas %v, want %d", in, state.SchemaVersion)
		}
		return nil
	})
	// Once all are upgraded it is written and applied (the state finds
	// no such reservation).
	if err := newAct(); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a reservation's act once every peer is upgraded: %v, want the state's answer (not found)", err)
	}
	// A peer down now changes nothing: the log holds the newest schema.
	down := (leader() + 1) % 3
	if err := logs[down].Close(); err != nil {
		t.Fatal(err)
	}
	logs[down] = nil
	l := logs[leader()]
	if v := l.writeSchema(time.Now()); v != state.SchemaVersion {
		t.Fatalf("with a peer down after the upgrade the leader writes schema %d, want %d", v, state.SchemaVersion)
	}
}

// TestTellSchema: a peer tells a leader of this release the schema it
// reads, and the leader's book has it (raft never sees the connection);
// a leader of the previous release answers the line with its hello and
// closes, which the peer takes as "not this leader".
func TestTellSchema(t *testing.T) {
	tc := peerTLS(t, t.TempDir())
	book := &peerBook{}
	leader, err := newStreamLayer("127.0.0.1:0", tc, "s1", "https://api-s1", book, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	peer, err := newStreamLayer("127.0.0.1:0", tc, "s2", "https://api-s2", &peerBook{}, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if err := peer.tellSchema(leader.Addr().String(), state.SchemaVersion, time.Second); err != nil {
		t.Fatalf("telling a leader of this release: %v", err)
	}
	if got := book.schemas(time.Now().Add(-time.Minute)); got["s2"] != state.SchemaVersion || len(got) != 1 {
		t.Fatalf("the leader's book holds %v, want s2 at %d", got, state.SchemaVersion)
	}
	select {
	case c := <-leader.conns:
		c.Close()
		t.Fatal("the schema line's connection reached raft")
	case <-time.After(100 * time.Millisecond):
	}

	// The previous release's handshake: its hello, one line read, and a
	// close when that line is not a raft hello.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tc)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "%s s1 https://api-s1\n", helloProto)
		_, _ = readLine(c, 1024)
	}()
	if err := peer.tellSchema(ln.Addr().String(), state.SchemaVersion, time.Second); !errors.Is(err, errOldLeader) {
		t.Fatalf("telling a leader of the previous release: %v, want errOldLeader", err)
	}
}
