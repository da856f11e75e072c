// Package raftlog is schedd's durable, replicated log: hashicorp/raft with
// a bbolt-backed log and stable store and file snapshots, and the FSM that
// applies committed entries to the state store. A write is acknowledged
// only once its entry is committed (fsynced) and applied.
//
// With no peers the node bootstraps a one-server cluster on first start
// and elects itself; on later starts raft replays the snapshot and the log
// tail into a fresh state store.
package raftlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/troupe-hpc/troupe/sched/state"
)

// ErrNotLeader is returned by Apply on a server that cannot take writes:
// the command was not applied, and sending it again (to the leader) is
// safe.
var ErrNotLeader = errors.New("not the raft leader")

// ErrUnknownOutcome is returned by Apply when the command reached the log
// but its fate is not known here: leadership was lost while committing,
// or raft shut down. It may be committed by the next leader or dropped;
// only a request that is idempotent (one request id) may be sent again.
var ErrUnknownOutcome = errors.New("outcome unknown")

// Config sets up a log.
type Config struct {
	Dir       string    // raft.db and snapshots/ live here
	ID        string    // server id; default "schedd1"
	LogOutput io.Writer // raft's own logging (warnings and up); default stderr
	// Bind is the TCP address raft listens on for its peers (HOST:PORT);
	// "" keeps raft in memory (a lone server).
	Bind string
	// Peers is the whole cluster, this server included, bootstrapped on
	// first start when the log is empty.
	Peers []Peer
	// Join starts without bootstrapping: the server waits for a leader
	// to add it (schedd --join).
	Join bool
}

// Peer is one raft server.
type Peer struct {
	ID   string
	Addr string // raft TCP address
}

// Log is an open replicated log feeding a state store.
type Log struct {
	raft  *raft.Raft
	bolt  *raftboltdb.BoltStore
	trans raft.Transport
	multi bool
}

// Open opens (or creates) the log in cfg.Dir, restores st from it, and
// waits until this server leads (a lone server elects itself at once).
func Open(ctx context.Context, cfg Config, st *state.Store) (*Log, error) {
	if cfg.ID == "" {
		cfg.ID = "schedd1"
	}
	if cfg.LogOutput == nil {
		cfg.LogOutput = os.Stderr
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("opening raft store in %s: %w", cfg.Dir, err)
	}
	snaps, err := raft.NewFileSnapshotStore(cfg.Dir, 2, cfg.LogOutput)
	if err != nil {
		bolt.Close()
		return nil, fmt.Errorf("opening snapshots in %s: %w", cfg.Dir, err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Error, Output: cfg.LogOutput})
	rc.HeartbeatTimeout = 200 * time.Millisecond
	rc.ElectionTimeout = 200 * time.Millisecond
	rc.LeaderLeaseTimeout = 100 * time.Millisecond
	rc.SnapshotThreshold = 8192
	rc.TrailingLogs = 10240
	var (
		addr  raft.ServerAddress
		trans raft.Transport
	)
	if cfg.Bind == "" {
		addr, trans = raft.NewInmemTransport(raft.ServerAddress(cfg.ID))
	} else {
		// Real peers: a little slack against a loaded machine's pauses;
		// a dead leader is still replaced within about a second.
		rc.HeartbeatTimeout = 500 * time.Millisecond
		rc.ElectionTimeout = 500 * time.Millisecond
		rc.LeaderLeaseTimeout = 250 * time.Millisecond
		tt, err := raft.NewTCPTransport(cfg.Bind, nil, 3, 5*time.Second, cfg.LogOutput)
		if err != nil {
			bolt.Close()
			return nil, fmt.Errorf("raft transport on %s: %w", cfg.Bind, err)
		}
		addr, trans = tt.LocalAddr(), tt
	}
	multi := cfg.Bind != ""

	has, err := raft.HasExistingState(bolt, bolt, snaps)
	if err != nil {
		bolt.Close()
		return nil, err
	}
	if !has && !cfg.Join {
		boot := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: addr}}}
		if len(cfg.Peers) > 0 {
			boot.Servers = nil
			for _, p := range cfg.Peers {
				boot.Servers = append(boot.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
			}
		}
		if err := raft.BootstrapCluster(rc, bolt, bolt, snaps, trans, boot); err != nil {
			bolt.Close()
			return nil, fmt.Errorf("bootstrapping raft: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, &fsm{st: st}, bolt, bolt, snaps, trans)
	if err != nil {
		bolt.Close()
		return nil, fmt.Errorf("starting raft: %w", err)
	}
	l := &Log{raft: r, bolt: bolt, trans: trans, multi: multi}
	if multi {
		// Peers: leadership comes and goes; the server follows it.
		return l, nil
	}
	if err := l.waitLeader(ctx); err != nil {
		l.Close()
		return nil, err
	}
	// Apply everything already in the log before serving reads.
	if err := r.Barrier(0).Error(); err != nil {
		l.Close()
		return nil, fmt.Errorf("replaying raft log: %w", err)
	}
	return l, nil
}

func (l *Log) waitLeader(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for l.raft.State() != raft.Leader {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for raft leadership: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// IsLeader reports whether this server takes writes and schedules.
func (l *Log) IsLeader() bool { return l.raft.State() == raft.Leader }

// AddVoter adds (or re-addresses) a raft server; the leader only.
func (l *Log) AddVoter(id, addr string) error {
	if err := l.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 10*time.Second).Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		return err
	}
	return nil
}

// AppliedIndex is the last raft index applied to the state here.
func (l *Log) AppliedIndex() uint64 { return l.raft.AppliedIndex() }

// Multi reports whether this log has peers.
func (l *Log) Multi() bool { return l.multi }

// Leader is the current leader's raft id ("" none known).
func (l *Log) Leader() string {
	_, id := l.raft.LeaderWithID()
	return string(id)
}

// Barrier waits until everything committed before it is applied here
// (a new leader calls it before acting on the state).
func (l *Log) Barrier(ctx context.Context) error {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	return l.raft.Barrier(timeout).Error()
}

// Apply commits cmd and returns what the state store answered. The
// command is durable on disk when Apply returns without error.
func (l *Log) Apply(ctx context.Context, cmd state.Command) (any, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	f := l.raft.Apply(b, timeout)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout):
			return nil, fmt.Errorf("%w: %v", ErrNotLeader, err) // never entered the log
		case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown):
			return nil, fmt.Errorf("%w: %v", ErrUnknownOutcome, err) // in the log, maybe committed
		}
		return nil, err
	}
	r := f.Response().(result)
	return r.value, r.err
}

// Restore replaces the state of every replica with d: a raft user
// restore (the leader installs it as a snapshot, followers receive it).
// d must have been checked: the FSM replaces its state only once d has
// decoded in full.
func (l *Log) Restore(ctx context.Context, d state.Dump) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: int64(len(b))}
	if err := l.raft.Restore(meta, bytes.NewReader(b), timeout); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		return err
	}
	return nil
}

// Snapshot forces a snapshot and log compaction now.
func (l *Log) Snapshot() error { return l.raft.Snapshot().Error() }

// Close stops raft and closes the store.
func (l *Log) Close() error {
	err := l.raft.Shutdown().Error()
	if c, ok := l.trans.(io.Closer); ok {
		_ = c.Close()
	}
	if cerr := l.bolt.Close(); err == nil {
		err = cerr
	}
	return err
}

type result struct {
	value any
	err   error
}

// fsm applies committed entries to the state store.
type fsm struct{ st *state.Store }

func (f *fsm) Apply(e *raft.Log) any {
	var c state.Command
	if err := json.Unmarshal(e.Data, &c); err != nil {
		return result{err: fmt.Errorf("raft entry %d: %w", e.Index, err)}
	}
	v, err := f.st.Apply(e.Index, c)
	return result{value: v, err: err}
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return dump(f.st.Snapshot().Dump()), nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var d state.Dump
	if err := json.NewDecoder(rc).Decode(&d); err != nil {
		return fmt.Errorf("reading raft snapshot: %w", err)
	}
	return f.st.Restore(d)
}

type dump state.Dump

func (d dump) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(state.Dump(d)); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (d dump) Release() {}
