package sched

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/accounting"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// A snapshot file (badmin snapshot save|restore) is one header line, the
// raft FSM's state dump as JSON, then the accounting store's backup
// (accounting.Backup: its own header line and one ended run per line):
//
//	troupe-snapshot/2 index=1234 bytes=56789 sha256=<hex of the state>\n
//	{"jobs":[...],"nodes":[...],...}troupe-accounting/1 rows=37 ...\n
//	{"id":1,...}\n
//
// The state is taken first, at raft index 1234, and the store read
// after it: a job leaves the state only once the store holds it, so the
// store's rows cover every job the state had dropped by then, and may
// hold runs that ended after it. A troupe-snapshot/1 file (an older
// badmin's) is the header and the state alone.
//
// Restore reads the whole file, checks every length and checksum and
// decodes it, and compares the live accounting store with it, before
// anything changes: a damaged file, or a store that holds other jobs
// under the snapshot's ids or lacks jobs the snapshot had handed to it,
// is refused and the live state and store stay as they were.
const (
	snapMagic        = "troupe-snapshot/1"
	snapMagicHistory = "troupe-snapshot/2"
)

// maxSnapshot bounds a snapshot file restore accepts.
const maxSnapshot = 4 << 30

// ErrBadSnapshot marks a snapshot file that is damaged or not one.
var ErrBadSnapshot = fmt.Errorf("%w: snapshot file refused", ErrInvalid)

// ErrHistoryMismatch marks a restore refused because the accounting
// store holds other jobs under the snapshot's job ids: another
// cluster's store, or ids given again after the snapshot (HTTP 409).
var ErrHistoryMismatch = fmt.Errorf("%w: the accounting store disagrees with the snapshot", state.ErrConflict)

// ErrHistoryBehind marks a restore refused because neither the
// accounting store nor the snapshot file holds jobs the snapshot's state
// had already handed to the store (HTTP 409).
var ErrHistoryBehind = fmt.Errorf("%w: the accounting store is older than the snapshot", state.ErrConflict)

// SnapshotFile is a snapshot file, read and checked.
type SnapshotFile struct {
	Index uint64     // the raft index the state was taken at
	State state.Dump // the replicated state
	// HasHistory: the file carries the accounting store's rows
	// (troupe-snapshot/2), History.
	HasHistory bool
	History    []api.HistoryJob
}

// SaveSnapshot writes the state as of now and then the accounting
// store's rows, in the snapshot file format.
func (s *Server) SaveSnapshot(ctx context.Context, w io.Writer) error {
	v := s.st.Snapshot()
	idx, _ := v.Index()
	body, err := json.Marshal(v.Dump())
	if err != nil {
		return err
	}
	var hist bytes.Buffer
	if _, err := s.acct.Backup(ctx, &hist); err != nil {
		return fmt.Errorf("saving the snapshot: %w", err)
	}
	sum := sha256.Sum256(body)
	if _, err := fmt.Fprintf(w, "%s index=%d bytes=%d sha256=%s\n", snapMagicHistory, idx, len(body), hex.EncodeToString(sum[:])); err != nil {
		return err
	}
	if _, err := w.Write(body); err != nil {
		return err
	}
	_, err = hist.WriteTo(w)
	return err
}

// ReadSnapshot reads and checks a snapshot file and returns its state.
func ReadSnapshot(r io.Reader) (state.Dump, error) {
	f, err := ReadSnapshotFile(r)
	if err != nil {
		return state.Dump{}, err
	}
	return f.State, nil
}

// ReadSnapshotFile reads and checks a snapshot file, state and history.
func ReadSnapshotFile(r io.Reader) (*SnapshotFile, error) {
	br := bufio.NewReader(r)
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("%w: no header line (%v)", ErrBadSnapshot, err)
	}
	f := strings.Fields(line)
	if len(f) != 4 || (f[0] != snapMagic && f[0] != snapMagicHistory) {
		return nil, fmt.Errorf("%w: the header is not %q followed by index, bytes and sha256", ErrBadSnapshot, snapMagicHistory)
	}
	idx, err0 := strconv.ParseUint(strings.TrimPrefix(f[1], "index="), 10, 64)
	n, err1 := strconv.ParseInt(strings.TrimPrefix(f[2], "bytes="), 10, 64)
	want, err2 := hex.DecodeString(strings.TrimPrefix(f[3], "sha256="))
	if err0 != nil || err1 != nil || err2 != nil || n < 0 || n > maxSnapshot || len(want) != sha256.Size ||
		!strings.HasPrefix(f[1], "index=") || !strings.HasPrefix(f[2], "bytes=") || !strings.HasPrefix(f[3], "sha256=") {
		return nil, fmt.Errorf("%w: malformed header %q", ErrBadSnapshot, strings.TrimSpace(line))
	}
	file := &SnapshotFile{Index: idx, HasHistory: f[0] == snapMagicHistory}
	limit := n + 1 // a state-only file ends with its body: one byte more is padding
	if file.HasHistory {
		limit = n
	}
	body, err := io.ReadAll(io.LimitReader(br, limit))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", ErrBadSnapshot, err)
	}
	if int64(len(body)) != n {
		return nil, fmt.Errorf("%w: the header says %d bytes, the file holds %d (truncated or padded)", ErrBadSnapshot, n, len(body))
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], want) {
		return nil, fmt.Errorf("%w: checksum mismatch: the body is damaged", ErrBadSnapshot)
	}
	if file.HasHistory {
		if file.History, err = accounting.ReadBackup(br); err != nil {
			return nil, fmt.Errorf("%w: the accounting section: %v", ErrBadSnapshot, err)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			return nil, fmt.Errorf("%w: bytes after the accounting section (padded, or two files joined)", ErrBadSnapshot)
		}
	}
	d, err := decodeState(body)
	if err != nil {
		return nil, err
	}
	file.State = d
	// The history must be this state's: a record under a job id the
	// state holds is that job's.
	inState := make(map[uint64]accounting.Identity, len(d.Jobs))
	for _, j := range d.Jobs {
		inState[j.ID] = accounting.Identity{ID: j.ID, User: j.User, Submitted: j.Submitted}
	}
	for i := range file.History {
		h := accounting.IdentityOf(&file.History[i])
		if w, ok := inState[h.ID]; ok && !w.Same(h) {
			return nil, fmt.Errorf("%w: the accounting section's %s is not the state's %s", ErrBadSnapshot, h, w)
		}
	}
	return file, nil
}

// decodeState decodes and checks a snapshot file's state body.
func decodeState(body []byte) (state.Dump, error) {
	var d state.Dump
	// The version first: a newer schedd's snapshot may hold fields this
	// one does not know, and that is the error to name.
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(body, &head); err == nil {
		if err := state.CheckSchema(head.Version); err != nil {
			return d, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
	}
	// Before schema 5 a node row was the whole view and carried its
	// derived allocation: read and dropped (state.LegacyNode).
	var legacy struct {
		state.Dump
		Nodes []*state.LegacyNode `json:"nodes"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&legacy); err != nil {
		return d, fmt.Errorf("%w: the body does not decode: %v", ErrBadSnapshot, err)
	}
	d = legacy.Dump
	for _, n := range legacy.Nodes {
		if n == nil {
			d.Nodes = append(d.Nodes, nil)
			continue
		}
		if n.Allocated != nil && head.Version >= 5 {
			return d, fmt.Errorf("%w: the body does not decode: node %q carries \"allocated\", which a schema %d row does not have", ErrBadSnapshot, n.Name, head.Version)
		}
		d.Nodes = append(d.Nodes, &n.Node)
	}
	seen := map[uint64]bool{}
	for _, j := range d.Jobs {
		if j == nil || j.ID == 0 || seen[j.ID] || len(j.Containers) == 0 {
			return d, fmt.Errorf("%w: a job entry is empty, repeated or without containers", ErrBadSnapshot)
		}
		seen[j.ID] = true
	}
	for _, n := range d.Nodes {
		if n == nil || n.Name == "" {
			return d, fmt.Errorf("%w: a node entry has no name", ErrBadSnapshot)
		}
	}
	return d, nil
}

// RestoreSnapshot checks the snapshot file in r and the accounting store
// against it and, only if both are whole and agree, puts the file's
// accounting rows back in the store (those it lacks) and then its state
// in force on every replica (a raft user restore). It answers how many
// jobs, nodes and history records it restored.
//
// allowMissingHistory restores the state although the store and the
// file lack jobs the state had handed to the store (their history is
// lost): for a site whose only backup is an older badmin's state-only
// file and whose store is gone. A store that holds other jobs under the
// snapshot's ids is refused all the same.
func (s *Server) RestoreSnapshot(ctx context.Context, r io.Reader, allowMissingHistory bool) (api.SnapshotRestored, error) {
	f, err := ReadSnapshotFile(r)
	if err != nil {
		return api.SnapshotRestored{}, err
	}
	if !s.raft.IsLeader() {
		return api.SnapshotRestored{}, fmt.Errorf("%w: a snapshot restore is taken by the leader; nothing was restored", raftlog.ErrNotLeader)
	}
	if err := s.checkHistory(ctx, f, allowMissingHistory); err != nil {
		return api.SnapshotRestored{}, err
	}
	d := f.State
	res := api.SnapshotRestored{Jobs: len(d.Jobs), Nodes: len(d.Nodes)}
	// The store first: once the state is in force, the history it
	// assumes the store holds is there. Rows the store holds already are
	// kept as they are (they were checked to be the same jobs).
	if f.HasHistory {
		added, err := s.acct.Put(ctx, f.History)
		if err != nil {
			return api.SnapshotRestored{}, fmt.Errorf("restoring the snapshot's accounting records (nothing was restored): %w", err)
		}
		res.History = &api.SnapshotHistory{Records: len(f.History), Added: added, After: len(historyAfter(f))}
	}
	// The state, reconciled first with what happened since it was saved
	// (the live state, the store, its ids: restore.go).
	if err := s.restore(ctx, &d); err != nil {
		return res, err
	}
	res.Jobs, res.Nodes = len(d.Jobs), len(d.Nodes) // as reconciled
	// Move every table's index past the restore, so blocking queries
	// (nodelets' assignments) wake up and see the new state.
	if _, err := s.apply(ctx, state.Command{Act: state.Touch{}}); err != nil && !errors.Is(err, context.Canceled) {
		return res, err
	}
	s.wake()
	args := []any{"jobs", res.Jobs, "nodes", res.Nodes, "index", f.Index}
	if h := res.History; h != nil {
		args = append(args, "history", h.Records, "history_added", h.Added, "history_after_snapshot", h.After)
	} else {
		args = append(args, "history", "none in the file; the accounting store kept as it was")
	}
	s.log.Warn("state restored from a snapshot file", args...)
	return res, nil
}

// historyAfter lists the file's accounting rows that the snapshot's
// state does not account for: runs that ended after the state was
// taken (of a job the state holds unended or at an earlier run, or
// submitted after it).
func historyAfter(f *SnapshotFile) []accounting.Key {
	last := f.State.LastJobID()
	inState := make(map[uint64]*state.Job, len(f.State.Jobs))
	for _, j := range f.State.Jobs {
		inState[j.ID] = j
	}
	var out []accounting.Key
	for i := range f.History {
		h := &f.History[i]
		j := inState[h.ID]
		switch {
		case h.ID > last,
			j != nil && j.Requeues < h.Requeues,
			j != nil && j.Requeues == h.Requeues && !j.State.Terminal():
			out = append(out, accounting.KeyOf(h))
		}
	}
	return out
}

// checkHistory refuses a restore whose accounting store disagrees with
// the snapshot file: a store that holds other jobs under the snapshot's
// job ids, or, for a state-only file, one that lacks the newest job the
// snapshot's state had handed to the store and dropped.
func (s *Server) checkHistory(ctx context.Context, f *SnapshotFile, allowMissing bool) error {
	want := make([]accounting.Identity, 0, len(f.State.Jobs)+len(f.History))
	for _, j := range f.State.Jobs {
		want = append(want, accounting.Identity{ID: j.ID, User: j.User, Submitted: j.Submitted})
	}
	for i := range f.History {
		want = append(want, accounting.IdentityOf(&f.History[i]))
	}
	dis, n, err := s.acct.Disagreements(ctx, want, 1)
	if err != nil {
		return fmt.Errorf("comparing the accounting store with the snapshot (nothing was restored): %w", err)
	}
	if n > 0 {
		more := ""
		if n > 1 {
			more = fmt.Sprintf(" (and %d more rows like it)", n-1)
		}
		return fmt.Errorf("%w: %s holds %s, run %d, where the snapshot has %s%s: it is another cluster's store, "+
			"or job ids were given again after the snapshot was saved; nothing was restored. "+
			"To restore this snapshot, stop schedd, move the store aside (%s), start schedd and restore again%s",
			ErrHistoryMismatch, s.storeName(), dis[0].Stored, dis[0].Run, dis[0].Want, more, s.storeAside(), s.refill(f))
	}
	// A file with an accounting section holds every job its state had
	// dropped (the store is read after the state, which drops a job only
	// once the store holds it). Only a state-only file, of an older
	// badmin, needs the store to have them; its state gave ids one after
	// the other (no schedd of that release skipped any), so the newest id
	// missing from it is the newest it dropped.
	if f.HasHistory || allowMissing {
		return nil
	}
	newest := newestPurged(&f.State)
	if newest == 0 {
		return nil
	}
	ok, err := s.acct.Covers(ctx, newest)
	if err != nil {
		return fmt.Errorf("comparing the accounting store with the snapshot (nothing was restored): %w", err)
	}
	if ok {
		return nil
	}
	file := "the snapshot file (a state-only " + snapMagic + " file, saved by an older badmin)"
	return fmt.Errorf("%w: the snapshot's state (raft index %d) had handed job %d and every earlier ended job to the "+
		"accounting store and dropped them, but neither %s nor %s holds job %d; restoring would leave bhist and bacct "+
		"without them; nothing was restored. Put back the accounting store saved with this snapshot "+
		"(SQLite: its accounting.db in the data dir, schedd stopped; PostgreSQL: pg_restore the dump taken with it) "+
		"and restore again, or restore the state without that history: badmin snapshot restore --allow-missing-history FILE",
		ErrHistoryBehind, f.Index, newest, s.storeName(), file, newest)
}

// newestPurged is the highest job id the state in d has given and
// dropped (exported to the accounting store and purged), 0 if none.
func newestPurged(d *state.Dump) uint64 {
	in := make(map[uint64]bool, len(d.Jobs))
	for _, j := range d.Jobs {
		in[j.ID] = true
	}
	for id := d.LastJobID(); id > 0; id-- {
		if !in[id] {
			return id
		}
	}
	return 0
}

// storeName names the accounting store in messages (never a DSN, which
// may hold a password).
func (s *Server) storeName() string {
	if s.acct.Driver() == accounting.DriverPostgres {
		return "the PostgreSQL accounting store"
	}
	return "the accounting store " + s.cfg.AccountingPath
}

// storeAside says how to set the store aside for an empty one.
func (s *Server) storeAside() string {
	if s.acct.Driver() == accounting.DriverPostgres {
		return "point accounting's dsn at a new, empty database"
	}
	p := s.cfg.AccountingPath
	return fmt.Sprintf("mv %s %s.aside, with its -wal and -shm files", p, p)
}

// refill says where the history comes from once the store is empty.
func (s *Server) refill(f *SnapshotFile) string {
	if f.HasHistory {
		return fmt.Sprintf(": the snapshot file carries the %d accounting records saved with it", len(f.History))
	}
	return ": this state-only " + snapMagic + " file carries no accounting records, so put the store saved with it in place first"
}
