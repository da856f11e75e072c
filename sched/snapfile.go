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
	"maps"
	"os"
	"slices"
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
//
// Neither save nor restore holds the file in memory: save encodes the
// state a row at a time, and the store's rows likewise, each into a file
// of the data dir that then follows its header (which carries its length
// and checksum); restore decodes the state as it reads it and copies
// the accounting section, checked row by row, to such a file, from which
// it refills the store in batches once the whole file is known sound.
// Memory follows the replicated state (which schedd holds anyway), not
// the accounting history.
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

// tempDir is where save and restore keep a snapshot file's sections
// while they work: the data dir (the system's temporary directory
// without one).
func (s *ledger) tempDir() string { return s.cfg.DataDir }

// SaveSnapshot writes the state as of now and then the accounting
// store's rows, in the snapshot file format. Both sections are written
// to files of the data dir first, a row at a time (the header that
// precedes each carries its length and checksum), and then copied to w:
// memory stays bounded by the state, whatever the history holds, and
// nothing is written to w unless both were read whole.
func (s *ledger) SaveSnapshot(ctx context.Context, w io.Writer) error {
	v := s.st.Snapshot()
	idx, _ := v.Index()
	body, err := os.CreateTemp(s.tempDir(), ".snapshot-state-*")
	if err != nil {
		return fmt.Errorf("saving the snapshot: %w", err)
	}
	defer func() { body.Close(); os.Remove(body.Name()) }()
	sum := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(body, sum), 1<<16)
	d := v.Dump()
	n, err := encodeDump(bw, &d)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("saving the snapshot: writing the state to %s: %w", body.Name(), err)
	}
	hist, err := os.CreateTemp(s.tempDir(), ".snapshot-accounting-*")
	if err != nil {
		return fmt.Errorf("saving the snapshot: %w", err)
	}
	defer func() { hist.Close(); os.Remove(hist.Name()) }()
	if _, err := s.acct.BackupTo(ctx, hist, s.tempDir()); err != nil {
		return fmt.Errorf("saving the snapshot: %w", err)
	}
	if _, err := fmt.Fprintf(w, "%s index=%d bytes=%d sha256=%s\n", snapMagicHistory, idx, n, hex.EncodeToString(sum.Sum(nil))); err != nil {
		return err
	}
	for _, f := range []*os.File{body, hist} {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("saving the snapshot: %w", err)
		}
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
	}
	return nil
}

// encodeDump writes d as the JSON object json.Marshal would, but a job
// and a node at a time, and answers the bytes written.
func encodeDump(w io.Writer, d *state.Dump) (int64, error) {
	cw := &countingWriter{w: w}
	rest := *d
	rest.Jobs, rest.Nodes = nil, nil
	b, err := json.Marshal(&rest)
	if err != nil {
		return 0, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return 0, err
	}
	delete(fields, "jobs")
	delete(fields, "nodes")
	keys := slices.Sorted(maps.Keys(fields))
	if i := slices.Index(keys, "version"); i > 0 {
		// The version first: a reader checks it before the rows.
		keys = append([]string{"version"}, slices.Delete(keys, i, i+1)...)
	}
	io.WriteString(cw, "{")
	for i, k := range keys {
		if i > 0 {
			io.WriteString(cw, ",")
		}
		fmt.Fprintf(cw, "%q:", k)
		cw.Write(fields[k])
	}
	list := func(name string, n int, row func(i int) any) {
		if len(keys) > 0 || name != "jobs" {
			io.WriteString(cw, ",")
		}
		fmt.Fprintf(cw, "%q:[", name)
		for i := range n {
			if i > 0 {
				io.WriteString(cw, ",")
			}
			b, err := json.Marshal(row(i))
			if err != nil {
				cw.err = err
				return
			}
			cw.Write(b)
		}
		io.WriteString(cw, "]")
	}
	list("jobs", len(d.Jobs), func(i int) any { return d.Jobs[i] })
	list("nodes", len(d.Nodes), func(i int) any { return d.Nodes[i] })
	io.WriteString(cw, "}")
	return cw.n, cw.err
}

// countingWriter counts what it writes and keeps the first error.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// ReadSnapshot reads and checks a snapshot file and returns its state.
func ReadSnapshot(r io.Reader) (state.Dump, error) {
	f, err := ReadSnapshotFile(r)
	if err != nil {
		return state.Dump{}, err
	}
	return f.State, nil
}

// ReadSnapshotFile reads and checks a snapshot file, state and history,
// and holds it all (restore reads a file with readSnapshot, holding the
// history in a file).
func ReadSnapshotFile(r io.Reader) (*SnapshotFile, error) {
	c, err := readSnapshot(r, "")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	f := &SnapshotFile{Index: c.Index, State: c.State, HasHistory: c.HasHistory}
	err = c.eachBatch(func(b []api.HistoryJob) error {
		f.History = append(f.History, b...)
		return nil
	})
	return f, err
}

// checkedSnapshot is a snapshot file read and checked whole: its state,
// and its accounting section kept in a file (rows), each row checked.
type checkedSnapshot struct {
	Index      uint64
	State      state.Dump
	HasHistory bool
	rows       *os.File // the accounting section, as read; nil: none
	Records    int      // the section's rows
	After      int      // of which the state does not account for (historyAfter)
}

// Close removes the file the accounting section was kept in.
func (c *checkedSnapshot) Close() {
	if c.rows != nil {
		c.rows.Close()
		os.Remove(c.rows.Name())
	}
}

// restoreBatch is how many accounting rows restore reads, checks and
// stores at once.
const restoreBatch = 1000

// eachBatch hands the accounting section's rows to f, restoreBatch at a
// time, in (job id, run) order; nothing without a section.
func (c *checkedSnapshot) eachBatch(f func([]api.HistoryJob) error) error {
	if c.rows == nil {
		return nil
	}
	if _, err := c.rows.Seek(0, io.SeekStart); err != nil {
		return err
	}
	batch := make([]api.HistoryJob, 0, restoreBatch)
	_, err := accounting.ScanBackup(bufio.NewReaderSize(c.rows, 1<<16), nil, func(h *api.HistoryJob) error {
		if batch = append(batch, *h); len(batch) == restoreBatch {
			err := f(batch)
			batch = batch[:0]
			return err
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		err = f(batch)
	}
	return err
}

// readSnapshot reads and checks the snapshot file in r: the header, the
// state (decoded as read, its checksum checked at its end), and the
// accounting section, copied row by row to a file of dir, each row
// checked to be the state's job where the state holds its id, and the
// section's checksum at its end. Nothing is put in force.
func readSnapshot(r io.Reader, dir string) (*checkedSnapshot, error) {
	br := bufio.NewReaderSize(r, 1<<16)
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
	c := &checkedSnapshot{Index: idx, HasHistory: f[0] == snapMagicHistory}
	// The state: decoded as it is read through the checksum; a body
	// that does not decode is read to its end first, so that damage is
	// named as such.
	sum := sha256.New()
	body := &countingReader{r: io.TeeReader(io.LimitReader(br, n), sum)}
	d, decErr := decodeStateFrom(body)
	if _, err := io.Copy(io.Discard, body); err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", ErrBadSnapshot, err)
	}
	if body.n != n {
		return nil, fmt.Errorf("%w: the header says %d bytes, the file holds %d (truncated or padded)", ErrBadSnapshot, n, body.n)
	}
	if !bytes.Equal(sum.Sum(nil), want) {
		return nil, fmt.Errorf("%w: checksum mismatch: the body is damaged", ErrBadSnapshot)
	}
	if decErr != nil {
		return nil, decErr
	}
	c.State = d
	if c.HasHistory {
		// The history must be this state's: a record under a job id
		// the state holds is that job's.
		inState := make(map[uint64]*state.Job, len(d.Jobs))
		for _, j := range d.Jobs {
			inState[j.ID] = j
		}
		last := d.LastJobID()
		rows, err := os.CreateTemp(dir, ".snapshot-restore-accounting-*")
		if err != nil {
			return nil, fmt.Errorf("restoring the snapshot: %w", err)
		}
		c.rows = rows
		out := bufio.NewWriterSize(rows, 1<<16)
		c.Records, err = accounting.ScanBackup(br, out, func(h *api.HistoryJob) error {
			hi := accounting.IdentityOf(h)
			if j := inState[h.ID]; j != nil {
				if w := (accounting.Identity{ID: j.ID, User: j.User, Submitted: j.Submitted}); !w.Same(hi) {
					return fmt.Errorf("%w: the accounting section's %s is not the state's %s", ErrBadSnapshot, hi, w)
				}
			}
			if isAfter(inState[h.ID], last, h) {
				c.After++
			}
			return nil
		})
		if err == nil {
			err = out.Flush()
		}
		if err != nil {
			c.Close()
			if errors.Is(err, accounting.ErrBadBackup) {
				return nil, fmt.Errorf("%w: the accounting section: %v", ErrBadSnapshot, err)
			}
			return nil, err
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		c.Close()
		if c.HasHistory {
			return nil, fmt.Errorf("%w: bytes after the accounting section (padded, or two files joined)", ErrBadSnapshot)
		}
		return nil, fmt.Errorf("%w: the header says %d bytes, the file holds more (padded)", ErrBadSnapshot, n)
	}
	return c, nil
}

// countingReader counts what it reads.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// decodeStateFrom decodes and checks a snapshot file's state body from
// r, a job and a node at a time.
func decodeStateFrom(r io.Reader) (state.Dump, error) {
	var d state.Dump
	bad := func(err error) (state.Dump, error) {
		return state.Dump{}, fmt.Errorf("%w: the body does not decode: %v", ErrBadSnapshot, err)
	}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return bad(fmt.Errorf("not a JSON object (%v)", err))
	}
	rest := map[string]json.RawMessage{}
	var legacy []*state.LegacyNode
	sawVersion := false
	// each decodes the elements of the array that follows into one
	// value at a time.
	each := func(f func() error) error {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		if t == nil {
			return nil // null
		}
		if t != json.Delim('[') {
			return fmt.Errorf("not an array")
		}
		for dec.More() {
			if err := f(); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		key, _ := t.(string)
		switch key {
		case "version":
			sawVersion = true
			// The version first: a newer schedd's snapshot may hold
			// fields this one does not know, and that is the error to
			// name.
			if err := dec.Decode(&d.Version); err != nil {
				return bad(err)
			}
			if err := state.CheckSchema(d.Version); err != nil {
				return d, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
			}
		case "jobs":
			err = each(func() error {
				var j *state.Job
				err := dec.Decode(&j)
				d.Jobs = append(d.Jobs, j)
				return err
			})
		case "nodes":
			// Before schema 5 a node row was the whole view and carried
			// its derived allocation: read and dropped (state.LegacyNode).
			err = each(func() error {
				var n *state.LegacyNode
				err := dec.Decode(&n)
				legacy = append(legacy, n)
				return err
			})
		default:
			var raw json.RawMessage
			err = dec.Decode(&raw)
			rest[key] = raw
		}
		if err != nil {
			return bad(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad(fmt.Errorf("more after the state object"))
	}
	if !sawVersion {
		if err := state.CheckSchema(0); err != nil {
			return d, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
	}
	// The other fields are small (settings, indexes, usage, tokens):
	// decoded together, strictly.
	b, err := json.Marshal(rest)
	if err != nil {
		return bad(err)
	}
	var other state.Dump
	od := json.NewDecoder(bytes.NewReader(b))
	od.DisallowUnknownFields()
	if err := od.Decode(&other); err != nil {
		return bad(err)
	}
	other.Version, other.Jobs = d.Version, d.Jobs
	d = other
	for _, n := range legacy {
		if n == nil {
			d.Nodes = append(d.Nodes, nil)
			continue
		}
		if n.Allocated != nil && d.Version >= 5 {
			return d, fmt.Errorf("%w: the body does not decode: node %q carries \"allocated\", which a schema %d row does not have", ErrBadSnapshot, n.Name, d.Version)
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
func (s *ledger) RestoreSnapshot(ctx context.Context, r io.Reader, allowMissingHistory bool) (api.SnapshotRestored, error) {
	f, err := readSnapshot(r, s.tempDir())
	if err != nil {
		return api.SnapshotRestored{}, err
	}
	defer f.Close()
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
		added := 0
		err := f.eachBatch(func(b []api.HistoryJob) error {
			n, err := s.acct.Put(ctx, b)
			added += n
			return err
		})
		if err != nil {
			return api.SnapshotRestored{}, fmt.Errorf("restoring the snapshot's accounting records (%d of them added; the state was not restored): %w", added, err)
		}
		res.History = &api.SnapshotHistory{Records: f.Records, Added: added, After: f.After}
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

// isAfter tells whether h, an accounting record of a snapshot file, is
// one the snapshot's state does not account for: a run that ended after
// the state was taken (of a job the state holds, j, unended or at an
// earlier run, or submitted after it: an id above last).
func isAfter(j *state.Job, last uint64, h *api.HistoryJob) bool {
	return h.ID > last ||
		(j != nil && j.Requeues < h.Requeues) ||
		(j != nil && j.Requeues == h.Requeues && !j.State.Terminal())
}

// checkHistory refuses a restore whose accounting store disagrees with
// the snapshot file: a store that holds other jobs under the snapshot's
// job ids, or, for a state-only file, one that lacks the newest job the
// snapshot's state had handed to the store and dropped. The file's
// records are compared restoreBatch at a time.
func (s *ledger) checkHistory(ctx context.Context, f *checkedSnapshot, allowMissing bool) error {
	var first *accounting.Disagreement
	total := 0
	check := func(want []accounting.Identity) error {
		dis, n, err := s.acct.Disagreements(ctx, want, 1)
		if err != nil {
			return fmt.Errorf("comparing the accounting store with the snapshot (nothing was restored): %w", err)
		}
		if n > 0 && first == nil {
			first = &dis[0]
		}
		total += n
		return nil
	}
	want := make([]accounting.Identity, 0, restoreBatch)
	for _, j := range f.State.Jobs {
		if want = append(want, accounting.Identity{ID: j.ID, User: j.User, Submitted: j.Submitted}); len(want) == restoreBatch {
			if err := check(want); err != nil {
				return err
			}
			want = want[:0]
		}
	}
	if len(want) > 0 {
		if err := check(want); err != nil {
			return err
		}
	}
	err := f.eachBatch(func(b []api.HistoryJob) error {
		want = want[:0]
		for i := range b {
			want = append(want, accounting.IdentityOf(&b[i]))
		}
		return check(want)
	})
	if err != nil {
		return err
	}
	if total > 0 {
		more := ""
		if total > 1 {
			more = fmt.Sprintf(" (and %d more rows like it)", total-1)
		}
		return fmt.Errorf("%w: %s holds %s, run %d, where the snapshot has %s%s: it is another cluster's store, "+
			"or job ids were given again after the snapshot was saved; nothing was restored. "+
			"To restore this snapshot, stop schedd, move the store aside (%s), start schedd and restore again%s",
			ErrHistoryMismatch, s.storeName(), first.Stored, first.Run, first.Want, more, s.storeAside(), s.refill(f))
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
func (s *ledger) storeName() string {
	if s.acct.Driver() == accounting.DriverPostgres {
		return "the PostgreSQL accounting store"
	}
	return "the accounting store " + s.cfg.AccountingPath
}

// storeAside says how to set the store aside for an empty one.
func (s *ledger) storeAside() string {
	if s.acct.Driver() == accounting.DriverPostgres {
		return "point accounting's dsn at a new, empty database"
	}
	p := s.cfg.AccountingPath
	return fmt.Sprintf("mv %s %s.aside, with its -wal and -shm files", p, p)
}

// refill says where the history comes from once the store is empty.
func (s *ledger) refill(f *checkedSnapshot) string {
	if f.HasHistory {
		return fmt.Sprintf(": the snapshot file carries the %d accounting records saved with it", f.Records)
	}
	return ": this state-only " + snapMagic + " file carries no accounting records, so put the store saved with it in place first"
}
