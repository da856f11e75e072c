package raftlog

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// DefaultRepeatEvery is how often a log line that repeats (the same
// message about the same peer) is written while it goes on: raft retries
// a lost peer's heartbeat four times a second and logs each failure.
const DefaultRepeatEvery = 30 * time.Second

// repeats rate-limits raft's log lines. The first line of a kind (level,
// message and the peer it names) is written; the same line again within
// every of the last one written is dropped and counted; the first after
// that is written with suppressed=N, the count of those dropped since.
// When a peer answers heartbeats again that is logged, with the count
// still pending, and its lines start afresh: the first failure of its
// next outage is written at once.
type repeats struct {
	mu    sync.Mutex
	every time.Duration
	now   func() time.Time
	out   hclog.Logger // where a line with its count goes (not limited)
	seen  map[repeatKey]*repeat
	// failing are the peers whose heartbeats from this server fail now
	// (while it leads; a change of leader clears them).
	failing map[raft.ServerID]bool
}

type repeatKey struct {
	level hclog.Level
	msg   string
	peer  string
}

type repeat struct {
	written    time.Time // when the last line of this kind was written
	suppressed int       // dropped since
}

func newRepeats(name string, out io.Writer, every time.Duration) *repeats {
	return &repeats{every: every, now: time.Now, seen: map[repeatKey]*repeat{}, failing: map[raft.ServerID]bool{},
		out: hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Info, Output: out})}
}

// logger is an hclog logger whose repeated lines r limits.
func (r *repeats) logger(name string, out io.Writer, level hclog.Level) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level, Output: out, Exclude: r.exclude})
}

// peerOf is the value of a line's "peer" (or, in an election's lines,
// "target") argument, "" when it has none: raft names a peer by its
// address or by its raft.Server.
func peerOf(args []any) string {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && (k == "peer" || k == "target") {
			return fmt.Sprint(args[i+1])
		}
	}
	return ""
}

// exclude reports whether a line is dropped (hclog's Exclude). A line
// written after some were dropped is written here, with their count,
// and dropped from its own logger.
func (r *repeats) exclude(level hclog.Level, msg string, args ...any) bool {
	k := repeatKey{level, msg, peerOf(args)}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.seen[k]
	if p == nil {
		r.seen[k] = &repeat{written: now}
		return false
	}
	if now.Sub(p.written) < r.every {
		p.suppressed++
		return true
	}
	n, prev := p.suppressed, p.written
	p.written, p.suppressed = now, 0
	if n == 0 {
		return false
	}
	r.out.Log(level, msg, append(args, "suppressed", n, "over", now.Sub(prev).Round(time.Second))...)
	return true
}

// resumed logs that peer (its id and address) answers heartbeats again,
// with the lines about it dropped since the last one written, and
// forgets them.
func (r *repeats) resumed(id, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, p := range r.seen {
		if k.peer != "" && (k.peer == addr || k.peer == id || strings.Contains(k.peer, " "+id+" ") || strings.Contains(k.peer, " "+addr+"}")) {
			n += p.suppressed
			delete(r.seen, k)
		}
	}
	r.out.Warn("peer answers heartbeats again", "peer", addr, "id", id, "suppressed", n)
}

// unreachable is how many of servers this server's heartbeats fail to
// reach now (as leader).
func (r *repeats) unreachable(servers []raft.Server) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range servers {
		if r.failing[s.ID] {
			n++
		}
	}
	return n
}

// watch follows raft's observations until done is closed: it logs peers'
// resumed heartbeats and keeps the set of peers whose heartbeats fail.
func (r *repeats) watch(rf *raft.Raft, done <-chan struct{}) {
	ch := make(chan raft.Observation, 64)
	o := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.ResumedHeartbeatObservation, raft.FailedHeartbeatObservation, raft.LeaderObservation:
			return true
		}
		return false
	})
	rf.RegisterObserver(o)
	go func() {
		defer rf.DeregisterObserver(o)
		for {
			select {
			case <-done:
				return
			case ob := <-ch:
				var res raft.ResumedHeartbeatObservation
				switch d := ob.Data.(type) {
				case raft.FailedHeartbeatObservation:
					r.mu.Lock()
					r.failing[d.PeerID] = true
					r.mu.Unlock()
					continue
				case raft.LeaderObservation:
					r.mu.Lock()
					clear(r.failing)
					r.mu.Unlock()
					continue
				case raft.ResumedHeartbeatObservation:
					res = d
				}
				r.mu.Lock()
				delete(r.failing, res.PeerID)
				r.mu.Unlock()
				addr := ""
				if f := rf.GetConfiguration(); f.Error() == nil {
					for _, s := range f.Configuration().Servers {
						if s.ID == res.PeerID {
							addr = string(s.Address)
						}
					}
				}
				r.resumed(string(res.PeerID), addr)
			}
		}
	}()
}
