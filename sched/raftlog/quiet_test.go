package raftlog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/sched/state"
)

// syncBuffer is a bytes.Buffer safe for raft's concurrent loggers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) lines(substr string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// A line repeated about one peer is written once per period, the next
// one with the count of those dropped; another peer's or another
// message's first line is written at once; a peer answering again is
// logged with the pending count, and its next failure shows at once.
func TestRepeatsLimitPerPeer(t *testing.T) {
	var buf syncBuffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newRepeats("raft", &buf, 30*time.Second)
	r.now = func() time.Time { return now }
	log := r.logger("raft", &buf, hclog.Error)

	beat := func(peer string) {
		log.Error("failed to heartbeat to", "peer", peer, "backoff time", 250*time.Millisecond, "error", "connection refused")
	}
	for range 100 { // 25 s at raft's 4 a second
		beat("10.0.0.3:7000")
		now = now.Add(250 * time.Millisecond)
	}
	if got := buf.lines("failed to heartbeat to"); len(got) != 1 || strings.Contains(got[0], "suppressed") {
		t.Fatalf("100 failures in 25s: want the first line alone, got %d lines:\n%s", len(got), strings.Join(got, "\n"))
	}
	beat("10.0.0.2:7000") // another peer
	log.Error("failed to appendEntries to", "peer", raft.Server{ID: "s3", Address: "10.0.0.3:7000"}, "error", "refused")
	if got := buf.lines("failed to heartbeat to: peer=10.0.0.2:7000"); len(got) != 1 {
		t.Fatalf("another peer's first failure: want it written, got %q", got)
	}
	if got := buf.lines("failed to appendEntries to"); len(got) != 1 {
		t.Fatalf("another message's first line: want it written, got %q", got)
	}
	// A candidate's vote requests name their peer as the target.
	for range 2 {
		log.Error("failed to make requestVote RPC", "target", raft.Server{ID: "s2", Address: "10.0.0.2:7000"}, "error", "refused")
		log.Error("failed to make requestVote RPC", "target", raft.Server{ID: "s3", Address: "10.0.0.3:7000"}, "error", "refused")
	}
	if got := buf.lines("requestVote"); len(got) != 2 {
		t.Fatalf("vote requests to two peers, twice: want one line per peer, got %q", got)
	}
	now = now.Add(5 * time.Second) // 30 s since the first line
	beat("10.0.0.3:7000")
	got := buf.lines("peer=10.0.0.3:7000")
	if len(got) != 2 || !strings.Contains(got[1], "suppressed=99") || !strings.Contains(got[1], "[ERROR]") {
		t.Fatalf("after the period: want the line again with suppressed=99 at ERROR, got:\n%s", strings.Join(got, "\n"))
	}
	beat("10.0.0.3:7000")
	log.Error("failed to appendEntries to", "peer", raft.Server{ID: "s3", Address: "10.0.0.3:7000"}, "error", "refused")
	r.resumed("s3", "10.0.0.3:7000")
	res := buf.lines("peer answers heartbeats again")
	// Dropped about s3: a heartbeat, an appendEntries and a vote request.
	if len(res) != 1 || !strings.Contains(res[0], "suppressed=3") || !strings.Contains(res[0], "id=s3") {
		t.Fatalf("resumed: want one line with the 3 lines about the peer dropped since, got %q", res)
	}
	beat("10.0.0.3:7000")
	if got := buf.lines("failed to heartbeat to: peer=10.0.0.3:7000"); len(got) != 3 {
		t.Fatalf("the next outage's first failure: want it written at once, got:\n%s", strings.Join(got, "\n"))
	}
	beat("10.0.0.2:7000") // the other peer is still limited
	if got := buf.lines("failed to heartbeat to: peer=10.0.0.2:7000"); len(got) != 1 {
		t.Fatalf("the other peer's lines: want them still limited, got %q", got)
	}
}

// With a peer of a 3-peer cluster stopped, its leader writes the first
// heartbeat failure and then nothing more about it while raft retries
// several times a second; when the peer is back, the leader logs it with
// the count of the lines it dropped; meanwhile it counts the peer
// unreachable. (Without the limit: one ERROR line
// per failed heartbeat, about 3 a second.)
func TestRaftQuietWhilePeerDown(t *testing.T) {
	bufs := []*syncBuffer{{}, {}, {}}
	c := openClusterLogs(t, []io.Writer{bufs[0], bufs[1], bufs[2]})
	defer func() {
		for _, l := range c.logs {
			if l != nil {
				_ = l.Close()
			}
		}
	}()
	lead := c.leader(t, 10*time.Second)
	down := (lead + 1) % 3
	var failed atomic.Int64
	ch := make(chan raft.Observation, 64)
	c.logs[lead].raft.RegisterObserver(raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		f, ok := o.Data.(raft.FailedHeartbeatObservation)
		return ok && string(f.PeerID) == c.cfgs[down].ID
	}))
	go func() {
		for range ch {
			failed.Add(1)
		}
	}()
	if err := c.logs[down].Close(); err != nil {
		t.Fatal(err)
	}
	c.logs[down] = nil
	const tries = 12
	eventually.True(t, 20*time.Second, fmt.Sprintf("the leader trying the stopped peer %d times", tries),
		func() bool { return failed.Load() >= tries })
	if l := c.logs[lead]; !l.IsLeader() {
		t.Skip("leadership moved while the peer was down (a loaded machine); the count is about one leader")
	}
	addr := c.cfgs[down].Bind
	got := bufs[lead].lines("failed to heartbeat to: peer=" + addr)
	t.Logf("%d failed heartbeats, %d lines", failed.Load(), len(got))
	if len(got) != 1 {
		t.Fatalf("%d failed heartbeats to the stopped peer: want 1 line, got %d:\n%s", failed.Load(), len(got), strings.Join(got, "\n"))
	}
	if n, p := c.logs[lead].Unreachable(), c.logs[lead].Peers(); n != 1 || p != 3 {
		t.Errorf("leader: %d of %d peers unreachable, want 1 of 3", n, p)
	}
	l, err := openWith(context.Background(), c.cfgs[down], state.New(), c.fault[down])
	if err != nil {
		t.Fatalf("reopening peer %d: %v", down+1, err)
	}
	c.logs[down] = l
	if !eventually.Within(20*time.Second, func() bool { return len(bufs[lead].lines("peer answers heartbeats again")) > 0 }) {
		t.Fatalf("no line about the peer answering again in 20s:\n%s", strings.Join(bufs[lead].lines(""), "\n"))
	}
	if n := c.logs[lead].Unreachable(); n != 0 {
		t.Errorf("leader: %d peers unreachable after the peer answered again, want 0", n)
	}
	res := bufs[lead].lines("peer answers heartbeats again")[0]
	if !strings.Contains(res, "peer="+addr) || strings.Contains(res, "suppressed=0") {
		t.Fatalf("want the peer back with the count of lines dropped, got %q", res)
	}
}
