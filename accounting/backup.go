package accounting

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
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// A backup of the store (the section a snapshot file carries after the
// raft state, sched.SaveSnapshot) is one header line and one stored
// record per line, as JSON (api.HistoryJob, what job_records holds):
//
//	troupe-accounting/1 rows=37 bytes=56789 sha256=<hex of the rows>\n
//	{"id":1,"run":0,...}\n
//	...
//
// It is the same for every driver: a SQLite store's backup restores into
// PostgreSQL and back. The jobs table's columns are derived from each
// record, so the records alone rebuild the store.
const backupMagic = "troupe-accounting/1"

// maxBackup bounds the rows section a backup reader accepts.
const maxBackup = 8 << 30

// ErrBadBackup marks a backup section that is damaged or not one.
var ErrBadBackup = errors.New("accounting backup refused")

// Backup writes every record the store holds, in the backup format,
// ordered by job id and run (BackupTo, its rows kept meanwhile in a
// file of the system's temporary directory).
func (s *Store) Backup(ctx context.Context, w io.Writer) (int, error) {
	return s.BackupTo(ctx, w, "")
}

// BackupTo is Backup with the rows kept, while they are read and
// summed, in a file of dir (removed after): the header that comes first
// carries their length and checksum, and memory stays bounded however
// many rows the store holds. The rows are read by one statement, so the
// backup is the store as of one moment (SQLite's and PostgreSQL's reads
// see one snapshot of the database for a statement's whole run) while
// exports go on. It returns how many rows it wrote.
func (s *Store) BackupTo(ctx context.Context, w io.Writer, dir string) (int, error) {
	tmp, err := os.CreateTemp(dir, ".accounting-backup-*")
	if err != nil {
		return 0, fmt.Errorf("accounting backup: %w", err)
	}
	defer func() { tmp.Close(); os.Remove(tmp.Name()) }()
	rows, err := s.db.QueryContext(ctx, `SELECT record FROM job_records ORDER BY id, run`)
	if err != nil {
		return 0, fmt.Errorf("accounting backup: %w", err)
	}
	defer rows.Close()
	sum := sha256.New()
	body := bufio.NewWriterSize(io.MultiWriter(tmp, sum), 1<<16)
	n, size := 0, int64(0)
	for rows.Next() {
		var blob string
		if err := rows.Scan(&blob); err != nil {
			return 0, fmt.Errorf("accounting backup: %w", err)
		}
		if strings.ContainsRune(blob, '\n') {
			// Records are written compact by Put; a stored one that is
			// not would split its line: write it compact.
			var c bytes.Buffer
			if err := json.Compact(&c, []byte(blob)); err != nil {
				return 0, fmt.Errorf("accounting backup: a stored record: %w", err)
			}
			blob = c.String()
		}
		body.WriteString(blob)
		if err := body.WriteByte('\n'); err != nil {
			return 0, fmt.Errorf("accounting backup: writing %s: %w", tmp.Name(), err)
		}
		size += int64(len(blob)) + 1
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("accounting backup: %w", err)
	}
	if err := body.Flush(); err != nil {
		return 0, fmt.Errorf("accounting backup: writing %s: %w", tmp.Name(), err)
	}
	if _, err := fmt.Fprintf(w, "%s rows=%d bytes=%d sha256=%s\n", backupMagic, n, size, hex.EncodeToString(sum.Sum(nil))); err != nil {
		return 0, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("accounting backup: %w", err)
	}
	if _, err := io.Copy(w, tmp); err != nil {
		return 0, err
	}
	return n, nil
}

// ReadBackup reads and checks a backup section from r, reading no
// further than its end, and returns its records. A damaged, truncated or
// malformed section, or one that holds a (job id, run) twice, is refused
// whole (ErrBadBackup). It holds every record: a large section is read
// with ScanBackup.
func ReadBackup(r *bufio.Reader) ([]api.HistoryJob, error) {
	var out []api.HistoryJob
	if _, err := ScanBackup(r, nil, func(h *api.HistoryJob) error {
		out = append(out, *h)
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// ScanBackup reads a backup section from r, reading no further than its
// end, one row at a time: each row is decoded and handed to each (which
// may refuse it), and, when copy is not nil, the section (header and
// rows) is written to it as read. Only once it returns nil is the
// section known whole: its checksum is checked at its end, so each must
// not act on a row before. Rows are in (job id, run) order, as Backup
// writes them; one out of order or repeated refuses the section. It
// answers the number of rows.
func ScanBackup(r *bufio.Reader, copy io.Writer, each func(*api.HistoryJob) error) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("%w: no %s header line (%v)", ErrBadBackup, backupMagic, err)
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != backupMagic || !strings.HasPrefix(f[1], "rows=") || !strings.HasPrefix(f[2], "bytes=") || !strings.HasPrefix(f[3], "sha256=") {
		return 0, fmt.Errorf("%w: the header is not %q followed by rows, bytes and sha256", ErrBadBackup, backupMagic)
	}
	rowsN, err1 := strconv.Atoi(strings.TrimPrefix(f[1], "rows="))
	n, err2 := strconv.ParseInt(strings.TrimPrefix(f[2], "bytes="), 10, 64)
	want, err3 := hex.DecodeString(strings.TrimPrefix(f[3], "sha256="))
	if err1 != nil || err2 != nil || err3 != nil || rowsN < 0 || n < 0 || n > maxBackup || len(want) != sha256.Size {
		return 0, fmt.Errorf("%w: malformed header %q", ErrBadBackup, strings.TrimSpace(line))
	}
	if copy != nil {
		if _, err := io.WriteString(copy, line); err != nil {
			return 0, err
		}
	}
	sum := sha256.New()
	src := io.Reader(io.LimitReader(r, n))
	if copy != nil {
		src = io.TeeReader(src, copy)
	}
	body := bufio.NewReaderSize(io.TeeReader(src, sum), 1<<16)
	var read int64
	var prev Key
	count := 0
	for {
		ln, err := body.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A row longer than the buffer: read it whole.
			rest, err2 := body.ReadBytes('\n')
			ln, err = append(bytes.Clone(ln), rest...), err2
		}
		read += int64(len(ln))
		if err == io.EOF && len(ln) == 0 {
			break
		}
		if err != nil && err != io.EOF {
			return 0, fmt.Errorf("%w: reading the rows: %v", ErrBadBackup, err)
		}
		if err == io.EOF {
			// A last row without its newline: the section is cut.
			break
		}
		var h api.HistoryJob
		dec := json.NewDecoder(bytes.NewReader(ln))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&h); err != nil {
			return 0, fmt.Errorf("%w: row %d does not decode: %v", ErrBadBackup, count+1, err)
		}
		k := KeyOf(&h)
		if h.ID == 0 || (count > 0 && (k.ID < prev.ID || (k.ID == prev.ID && k.Run <= prev.Run))) {
			return 0, fmt.Errorf("%w: row %d is job %d run %d, empty, repeated or out of (job, run) order", ErrBadBackup, count+1, h.ID, h.Requeues)
		}
		prev = k
		count++
		if each != nil {
			if err := each(&h); err != nil {
				return 0, err
			}
		}
	}
	if read != n {
		return 0, fmt.Errorf("%w: the header says %d bytes of rows, the file holds %d (truncated)", ErrBadBackup, n, read)
	}
	if !bytes.Equal(sum.Sum(nil), want) {
		return 0, fmt.Errorf("%w: checksum mismatch: the rows are damaged", ErrBadBackup)
	}
	if count != rowsN {
		return 0, fmt.Errorf("%w: the header says %d rows, the section holds %d", ErrBadBackup, rowsN, count)
	}
	return count, nil
}

// Identity is what makes a job the same job wherever it is recorded:
// its id, its owner and its submit time. Two clusters both number their
// jobs from 1; the same id with another owner or submit time is another
// job.
type Identity struct {
	ID        uint64
	User      string
	Submitted time.Time
}

// IdentityOf is h's identity.
func IdentityOf(h *api.HistoryJob) Identity {
	return Identity{ID: h.ID, User: h.User, Submitted: h.Submitted}
}

// Same reports whether i and o are the same job (submit times compared
// to the nanosecond, as the store keeps them).
func (i Identity) Same(o Identity) bool {
	return i.ID == o.ID && i.User == o.User && nanos(i.Submitted) == nanos(o.Submitted)
}

func (i Identity) String() string {
	return fmt.Sprintf("job %d (user %s, submitted %s)", i.ID, i.User, i.Submitted.UTC().Format(time.RFC3339Nano))
}

// Disagreement is a stored row whose job is not the one want names by
// the same id.
type Disagreement struct {
	Want   Identity
	Stored Identity
	Run    int // the stored row's run
}

// Disagreements compares each of want with the rows the store holds for
// its id (every run) and returns the first limit rows that are another
// job, and how many there are in all.
func (s *Store) Disagreements(ctx context.Context, want []Identity, limit int) ([]Disagreement, int, error) {
	byID := make(map[uint64]Identity, len(want))
	ids := make([]uint64, 0, len(want))
	for _, w := range want {
		if _, ok := byID[w.ID]; !ok {
			ids = append(ids, w.ID)
		}
		byID[w.ID] = w
	}
	var out []Disagreement
	total := 0
	const chunk = 500
	for len(ids) > 0 {
		n := min(chunk, len(ids))
		part := ids[:n]
		ids = ids[n:]
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = int64(id)
		}
		rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT id, run, user_name, submitted FROM jobs WHERE id IN (`+
			strings.TrimSuffix(strings.Repeat("?,", n), ",")+`) ORDER BY id, run`), args...)
		if err != nil {
			return nil, 0, fmt.Errorf("accounting comparison: %w", err)
		}
		for rows.Next() {
			var id, sub int64
			var run int
			var user string
			if err := rows.Scan(&id, &run, &user, &sub); err != nil {
				rows.Close()
				return nil, 0, fmt.Errorf("accounting comparison: %w", err)
			}
			got := Identity{ID: uint64(id), User: user}
			if sub != 0 {
				got.Submitted = time.Unix(0, sub).UTC()
			}
			w := byID[uint64(id)]
			if w.Same(got) {
				continue
			}
			total++
			if len(out) < limit {
				out = append(out, Disagreement{Want: w, Stored: got, Run: run})
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("accounting comparison: %w", err)
		}
	}
	return out, total, nil
}

// Covers reports whether the store holds a row of job id, or of an
// element of array id (an array's own row is stored as its elements).
func (s *Store) Covers(ctx context.Context, id uint64) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM (SELECT 1 FROM jobs WHERE id = ? OR array_id = ? LIMIT 1) AS hit`), int64(id), int64(id)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("accounting lookup: %w", err)
	}
	return n > 0, nil
}
