// Package raftlog is schedd's durable, replicated log: hashicorp/raft with
// a bbolt-backed log and stable store and file snapshots, and the FSM that
// applies committed entries to the state store. A write is acknowledged
// only once its entry is committed (fsynced) and applied.
//
// With no peers the node bootstraps a one-server cluster on first start
// and elects itself; on later starts raft replays the snapshot and the log
// tail into a fresh state store.
//
// Contracts:
//
//   - Nothing damaged is replayed: command entries carry a CRC-32C; Open
//     reads raft.db and the newest snapshot back first and refuses a
//     damaged one (ErrDamaged, naming the file and entry); an entry the
//     FSM cannot decode at run time stops it (Failed, Err).
//   - Peers authenticate: raft runs over a stream layer doing mutual TLS
//     against the cluster CA (PeerTLS), then a one-line hello that tells
//     each peer the other's API address (LeaderAPI).
//   - A restarted peer is CaughtUp only once it has applied its log up to
//     the last command it had on disk.
//   - Close is bounded (ShutdownTimeout): it cuts raft's connections.
//   - A full disk is ErrDiskFull at once, not a lost leadership.
//   - In the middle of a rolling upgrade the leader writes entries in the
//     oldest schema a peer of the configuration reads (writeSchema), so
//     that a peer of the previous release never meets one it refuses.
//
// Of troupe it imports sched/state only; it must not import sched (the
// controller) or nodelet/....
package raftlog

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/troupe-hpc/troupe/sched/fault"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/troupe-hpc/troupe/sched/state"
)

// ErrNotLeader is returned by Apply on a server that cannot take writes:
// the command was not applied, and sending it again (to the leader) is
// safe.
var ErrNotLeader = fault.ErrNotLeader

// ErrUnknownOutcome is returned by Apply when the command reached the log
// but its fate is not known here: leadership was lost while committing,
// or raft shut down. It may be committed by the next leader or dropped;
// only a request that is idempotent (one request id) may be sent again.
var ErrUnknownOutcome = fault.ErrUnknownOutcome

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
	// TLS authenticates the peers to each other (mutual TLS, see
	// PeerTLS); nil sends raft in the clear, for dev clusters only.
	TLS *tls.Config
	// API is this server's API address, told to the peers it connects
	// to so that they can send clients to it while it leads.
	API string
	// ShutdownTimeout bounds Close (default DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// RepeatEvery is how often a raft log line that repeats (the same
	// message about the same peer, as while a peer is down) is written,
	// with the count of those dropped since (default
	// DefaultRepeatEvery).
	RepeatEvery time.Duration
}

// faults make a server misbehave on purpose; Open makes none, the
// package's tests pass them to open.
type faults struct {
	// wrap wraps each raft connection, both ways (a partition, a
	// slow link).
	wrap func(net.Conn) net.Conn
	// silent tells the leader no schema, as a peer of the previous
	// release.
	silent bool
	// snapshotBytes replaces snapshotBytes (0: keep it).
	snapshotBytes int64
}

// DefaultShutdownTimeout is how long Close waits for raft to stop.
const DefaultShutdownTimeout = 3 * time.Second

// ErrShutdownTimeout is Close's answer when raft did not stop in time
// even with its connections cut; the log on disk is consistent (every
// write was synced): the process should exit.
var ErrShutdownTimeout = errors.New("raft did not stop in time")

// Peer is one raft server.
type Peer struct {
	ID   string
	Addr string // raft TCP address
}

// Log is an open replicated log feeding a state store.
type Log struct {
	raft    *raft.Raft
	bolt    *raftboltdb.BoltStore
	store   *store
	trans   raft.Transport
	stream  *streamLayer // nil: in memory
	book    *peerBook
	multi   bool
	fsm     *fsm
	stopMax time.Duration
	quiet   chan struct{} // closed by Close: the watch on peers' heartbeats ends
	peers   *repeats      // raft's log lines, and the peers whose heartbeats fail
	// start is the index of the last command this server had on disk
	// when it opened: until it has applied that far its state is older
	// than what it acknowledged before (CaughtUp).
	start  uint64
	caught atomic.Bool
	self   string
}

// Open opens (or creates) the log in cfg.Dir, restores st from it, and
// waits until this server leads (a lone server elects itself at once).
func Open(ctx context.Context, cfg Config, st *state.Store) (*Log, error) {
	return openWith(ctx, cfg, st, faults{})
}

func openWith(ctx context.Context, cfg Config, st *state.Store, f faults) (*Log, error) {
	if cfg.ID == "" {
		cfg.ID = "schedd1"
	}
	if cfg.LogOutput == nil {
		cfg.LogOutput = os.Stderr
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	bolt, snaps, lastCmd, err := openStores(cfg.Dir, cfg.LogOutput)
	if err != nil {
		return nil, err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	every := cfg.RepeatEvery
	if every <= 0 {
		every = DefaultRepeatEvery
	}
	quiet := newRepeats("raft", cfg.LogOutput, every)
	rc.Logger = quiet.logger("raft", cfg.LogOutput, hclog.Error)
	rc.HeartbeatTimeout = 200 * time.Millisecond
	rc.ElectionTimeout = 200 * time.Millisecond
	rc.LeaderLeaseTimeout = 100 * time.Millisecond
	// A restart reads the last snapshot and replays the log after it.
	// raft snapshots after SnapshotThreshold entries, whatever they
	// hold; an entry may hold a thousand jobs (a batch), so the fsm also
	// asks for one once the entries applied since the last hold a
	// quarter of its bytes (snapshotBytes): what a restart replays stays
	// within a quarter of what it reads.
	rc.SnapshotThreshold = 8192
	rc.TrailingLogs = 10240
	var (
		addr   raft.ServerAddress
		trans  raft.Transport
		stream *streamLayer
		book   = &peerBook{}
	)
	if cfg.Bind == "" {
		addr, trans = raft.NewInmemTransport(raft.ServerAddress(cfg.ID))
	} else {
		// Real peers: a little slack against a loaded machine's pauses;
		// a dead leader is still replaced within about a second.
		rc.HeartbeatTimeout = 500 * time.Millisecond
		rc.ElectionTimeout = 500 * time.Millisecond
		rc.LeaderLeaseTimeout = 250 * time.Millisecond
		sl, err := newStreamLayer(cfg.Bind, cfg.TLS, cfg.ID, cfg.API, book, cfg.LogOutput, f.wrap)
		if err != nil {
			bolt.Close()
			return nil, fmt.Errorf("raft transport on %s: %w", cfg.Bind, err)
		}
		stream = sl
		nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: sl, MaxPool: 3, Timeout: 5 * time.Second,
			Logger: quiet.logger("raft-net", cfg.LogOutput, hclog.Error)})
		addr, trans = raft.ServerAddress(sl.Addr().String()), &transport{NetworkTransport: nt, stream: sl}
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
	fm := &fsm{st: st, path: filepath.Join(cfg.Dir, "raft.db"), failed: make(chan struct{}), snapWanted: make(chan struct{}, 1),
		minSnap: cmp.Or(f.snapshotBytes, snapshotBytes)}
	if metas, err := snaps.List(); err == nil && len(metas) > 0 {
		fm.snapBytes.Store(metas[0].Size) // the newest, which raft restores
	}
	ls := &store{BoltStore: bolt, dir: cfg.Dir, stop: make(chan struct{})}
	r, err := raft.NewRaft(rc, fm, ls, ls, snaps, trans)
	if err != nil {
		bolt.Close()
		return nil, fmt.Errorf("starting raft on %s: %w", cfg.Dir, err)
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	l := &Log{self: string(rc.LocalID), raft: r, bolt: bolt, store: ls, trans: trans, stream: stream, book: book, multi: multi, fsm: fm, stopMax: cfg.ShutdownTimeout,
		start: lastCmd, quiet: make(chan struct{}), peers: quiet}
	quiet.watch(r, l.quiet)
	go l.snapshotLoop()
	if multi {
		// Peers: leadership comes and goes; the server follows it.
		if !f.silent {
			go l.tellSchemaLoop(string(rc.LocalID))
		}
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
	if err := fm.err(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// snapshotLoop takes the snapshots the fsm asks for (snapshotBytes)
// until Close.
func (l *Log) snapshotLoop() {
	for {
		select {
		case <-l.quiet:
			return
		case <-l.fsm.snapWanted:
			// raft takes one snapshot at a time: an ask refused while
			// one of its own runs, or one that failed, is asked again
			// a second later while the log is still past the bytes,
			// even if no entry comes to ask.
			for l.raft.Snapshot().Error() != nil && l.fsm.over() {
				select {
				case <-l.quiet:
					return
				case <-time.After(time.Second):
				}
			}
		}
	}
}

// CaughtUp reports whether this server has applied its log up to what it
// had on disk when it opened: a restarted follower must not answer reads
// from the empty or old state it starts with (it redirects them to the
// leader until then). Once true it stays true.
func (l *Log) CaughtUp() bool {
	if l.caught.Load() {
		return true
	}
	if l.fsm.applied() >= l.start {
		l.caught.Store(true)
		return true
	}
	return false
}

// Replay is how far this server's state has applied its log, of the
// last command it had on disk when it opened. (raft's AppliedIndex runs
// ahead: it counts entries handed to the FSM, not yet applied.)
func (l *Log) Replay() (applied, onDisk uint64) { return l.fsm.applied(), l.start }

// Failed is closed when the FSM met an entry it cannot decode: the state
// stops at the entry before it and Err says which; the server must stop.
func (l *Log) Failed() <-chan struct{} { return l.fsm.failed }

// Err is why the log failed (nil while it has not).
func (l *Log) Err() error { return l.fsm.err() }

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

// Peers is how many servers the raft configuration holds (voters and
// not), this one included.
func (l *Log) Peers() int {
	f := l.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	return len(f.Configuration().Servers)
}

// Unreachable is how many peers this server, as leader, fails to reach
// with its heartbeats now (0 on a follower).
func (l *Log) Unreachable() int {
	f := l.raft.GetConfiguration()
	if !l.IsLeader() || f.Error() != nil {
		return 0
	}
	return l.peers.unreachable(f.Configuration().Servers)
}

// LastIndex is the index of the last entry in this server's log (or of
// its last snapshot): on the leader, no index it has answered with is
// higher.
func (l *Log) LastIndex() uint64 { return l.raft.LastIndex() }

// Multi reports whether this log has peers.
func (l *Log) Multi() bool { return l.multi }

// Leader is the current leader's raft id ("" none known).
func (l *Log) Leader() string {
	_, id := l.raft.LeaderWithID()
	return string(id)
}

// LeaderAPI is the current leader's API address as the leader told this
// server when its raft connection opened ("" none known). It does not
// depend on the replicated state, so a peer that has not replayed its
// log yet still knows where to send clients.
func (l *Log) LeaderAPI() string {
	_, id := l.raft.LeaderWithID()
	if id == "" {
		return ""
	}
	return l.book.get(string(id))
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
	schema := l.writeSchema(time.Now())
	if need := cmd.NeedsSchema(); schema < need {
		return nil, fmt.Errorf("%w: a %s entry is schema %d's, and a peer reads only %d", ErrOlderPeer, cmd.Kind(), need, schema)
	}
	b, err := encodeCommand(cmd, schema)
	if err != nil {
		return nil, err
	}
	if err := l.store.diskFull(); err != nil && !l.IsLeader() {
		return nil, err // the failed write made raft step down: say why
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	f := l.raft.Apply(b, timeout)
	if err := f.Error(); err != nil {
		if full := l.store.diskFull(); full != nil {
			return nil, full // this write, or one just before it, did not fit: raft steps down
		}
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

// Schemas in a cluster of several releases. The leader writes each entry
// in the oldest schema any peer of the raft configuration reads, so that
// a peer of the previous release, in the middle of a rolling upgrade,
// never meets an entry it refuses (it would stop). A peer tells the
// leader the newest schema it reads every tellEvery (tellSchema); a peer
// that has told none within schemaFresh (the previous release, which
// cannot tell, or a peer that is down) is taken to read OldestSchema.
// Once an entry of the newest schema is in the log (the state's Schema)
// there is no going back: the leader writes that schema from then on,
// whoever is up, and peers stop telling.
const (
	tellEvery   = time.Second
	schemaFresh = 5 * time.Second
)

// ErrOlderPeer marks an entry refused because a peer of the
// configuration reads only an older schema than the entry's kind needs
// (state.Command.NeedsSchema); nothing was written.
var ErrOlderPeer = errors.New("a peer reads an older schema")

// WriteSchema is the schema version of the entries this leader writes
// now: the oldest any peer of the configuration reads.
func (l *Log) WriteSchema() int { return l.writeSchema(time.Now()) }

// writeSchema is the schema version of the entries this leader writes
// now.
func (l *Log) writeSchema(now time.Time) int {
	in := l.fsm.st.Snapshot().Schema()
	if !l.multi || in >= state.SchemaVersion {
		return state.SchemaVersion
	}
	f := l.raft.GetConfiguration()
	if f.Error() != nil {
		return in
	}
	var ids []string
	for _, sv := range f.Configuration().Servers {
		ids = append(ids, string(sv.ID))
	}
	return oldestRead(in, ids, l.self, l.book.schemas(now.Add(-schemaFresh)))
}

// oldestRead is the oldest schema the servers ids read, by what they
// told (a server that told none reads OldestSchema), and never older
// than in, the schema the state is in already. self, the leader, reads
// SchemaVersion.
func oldestRead(in int, ids []string, self string, told map[string]int) int {
	v := state.SchemaVersion
	for _, id := range ids {
		if id == self {
			continue
		}
		t, ok := told[id]
		if !ok {
			t = state.OldestSchema
		}
		v = min(v, t)
	}
	return max(v, in)
}

// tellSchemaLoop tells the leader, every tellEvery, the newest schema
// this peer reads, while the state is in an older one (a rolling upgrade
// not finished, or a restore of a snapshot of the previous release),
// until the log closes. A leader of an older release refuses the line; it
// is told again only after retellRefused (it may have been upgraded and
// restarted under the same id since), so it logs one refusal a peer in
// that time.
func (l *Log) tellSchemaLoop(self string) {
	t := time.NewTicker(tellEvery)
	defer t.Stop()
	var (
		refused   string
		refusedAt time.Time
	)
	for {
		select {
		case <-l.stream.done:
			return
		case <-t.C:
		}
		if l.fsm.st.Snapshot().Schema() >= state.SchemaVersion {
			continue
		}
		addr, id := l.raft.LeaderWithID()
		if id == "" || string(id) == self || string(id) == refused && time.Since(refusedAt) < retellRefused {
			continue
		}
		err := l.stream.tellSchema(string(addr), state.SchemaVersion, helloTimeout)
		if errors.Is(err, errOldLeader) {
			refused, refusedAt = string(id), time.Now()
		}
	}
}

// retellRefused is how long a peer waits before it tells a leader that
// refused its schema line (an older release's) again.
const retellRefused = 30 * time.Second

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

// Close stops raft and closes the store, within the shutdown timeout.
// It cuts raft's connections as soon as raft is told to stop: an RPC to
// a peer that a partition made silent would otherwise hold its goroutine
// (and raft's shutdown) for the transport's timeout, or for ever on a
// send buffer that never drains. If raft still has not stopped by the
// timeout Close answers ErrShutdownTimeout and leaves the store open
// (every write in it was synced) for the process to exit.
func (l *Log) Close() error {
	f := l.raft.Shutdown()
	close(l.store.stop)
	close(l.quiet)
	if l.stream != nil {
		l.stream.Close()
		l.stream.closeAll()
	}
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(l.stopMax):
		return fmt.Errorf("%w (%v)", ErrShutdownTimeout, l.stopMax)
	}
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

// fsm applies committed entries to the state store. An entry it cannot
// decode is never skipped: the fsm records the failure, applies nothing
// from then on, and the Log reports it (Failed, Err) so that the server
// stops rather than serve a state with a hole in it.
type fsm struct {
	st     *state.Store
	path   string // raft.db, for messages
	mu     sync.Mutex
	fatal  error
	failed chan struct{}
	last   atomic.Uint64 // the last command entry applied (accepted or not)
	// logBytes are the bytes of the entries applied since the last
	// snapshot began, snapBytes the size of the last snapshot written;
	// snapWanted asks snapshotLoop for a snapshot.
	logBytes   atomic.Int64
	snapBytes  atomic.Int64
	snapWanted chan struct{}
	minSnap    int64 // snapshotBytes
}

// snapshotBytes is the least log, in bytes of entries, the fsm asks a
// snapshot for: past it, once the log since the last snapshot is a
// quarter of that snapshot's size. Replaying an entry costs a restart
// more than reading its rows from a snapshot (one goroutine, where a
// snapshot's are decoded on every core), so the log a restart replays
// is kept to a quarter of what it reads, for a snapshot written every
// quarter of the state's size in new entries.
const snapshotBytes = 64 << 20

// over tells whether the log since the last snapshot has grown past
// snapshotBytes and a quarter of that snapshot's size.
func (f *fsm) over() bool {
	return f.logBytes.Load() >= max(f.minSnap, f.snapBytes.Load()/4)
}

// grew counts an applied entry of n bytes, asking for a snapshot when
// the log since the last one has grown past snapshotBytes and a quarter
// of that snapshot's size.
func (f *fsm) grew(n int) {
	f.logBytes.Add(int64(n))
	if !f.over() {
		return
	}
	select {
	case f.snapWanted <- struct{}{}:
	default:
	}
}

// applied is the raft index the state has applied up to: the last
// command entry, or the snapshot it restored if that is later.
func (f *fsm) applied() uint64 {
	idx, _ := f.st.Snapshot().Index()
	return max(idx, f.last.Load())
}

func (f *fsm) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fatal
}

func (f *fsm) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal == nil {
		f.fatal = err
		close(f.failed)
	}
}

func (f *fsm) Apply(e *raft.Log) any {
	if err := f.err(); err != nil {
		return result{err: err}
	}
	c, err := decodeCommand(e.Data)
	if errors.Is(err, state.ErrSchema) {
		// Written by a newer schedd: stop here, never skip it.
		err = fmt.Errorf("%s: entry %d: %w", f.path, e.Index, err)
		f.fail(err)
		return result{err: err}
	}
	if err != nil {
		err = fmt.Errorf("%w: %s: entry %d: %v; %s", ErrDamaged, f.path, e.Index, err, recoverHint)
		f.fail(err)
		return result{err: err}
	}
	v, err := f.st.Apply(e.Index, c)
	f.last.Store(e.Index)
	f.grew(len(e.Data))
	return result{value: v, err: err}
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.logBytes.Store(0) // the snapshot holds every entry applied so far
	return &dump{d: f.st.Snapshot().Dump(), f: f}, nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	// A job at a time, never the whole text; each stored as decoded.
	if err := f.st.RestoreFrom(rc); err != nil {
		return fmt.Errorf("reading raft snapshot: %w", err)
	}
	return nil
}

// dump is a snapshot being written; f learns its size.
type dump struct {
	d state.Dump
	f *fsm
}

func (d *dump) Persist(sink raft.SnapshotSink) error {
	w := &counter{w: sink}
	if err := state.WriteDump(w, d.d); err != nil {
		sink.Cancel()
		return err
	}
	d.f.snapBytes.Store(w.n)
	return sink.Close()
}

func (d *dump) Release() {}

// counter counts the bytes written through it.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
