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
// ordered by job id and run. The rows are read by one statement, so the
// backup is the store as of one moment (SQLite's and PostgreSQL's reads
// see one snapshot of the database for a statement's whole run) while
// exports go on. It returns how many rows it wrote.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT record FROM job_records ORDER BY id, run`)
	if err != nil {
		return 0, fmt.Errorf("accounting backup: %w", err)
	}
	defer rows.Close()
	var body bytes.Buffer
	n := 0
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
		body.WriteByte('\n')
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("accounting backup: %w", err)
	}
	sum := sha256.Sum256(body.Bytes())
	if _, err := fmt.Fprintf(w, "%s rows=%d bytes=%d sha256=%s\n", backupMagic, n, body.Len(), hex.EncodeToString(sum[:])); err != nil {
		return 0, err
	}
	_, err = body.WriteTo(w)
	return n, err
}

// ReadBackup reads and checks a backup section from r, reading no
// further than its end. A damaged, truncated or malformed section, or
// one that holds a (job id, run) twice, is refused whole (ErrBadBackup).
func ReadBackup(r *bufio.Reader) ([]api.HistoryJob, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("%w: no %s header line (%v)", ErrBadBackup, backupMagic, err)
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != backupMagic || !strings.HasPrefix(f[1], "rows=") || !strings.HasPrefix(f[2], "bytes=") || !strings.HasPrefix(f[3], "sha256=") {
		return nil, fmt.Errorf("%w: the header is not %q followed by rows, bytes and sha256", ErrBadBackup, backupMagic)
	}
	rowsN, err1 := strconv.Atoi(strings.TrimPrefix(f[1], "rows="))
	n, err2 := strconv.ParseInt(strings.TrimPrefix(f[2], "bytes="), 10, 64)
	want, err3 := hex.DecodeString(strings.TrimPrefix(f[3], "sha256="))
	if err1 != nil || err2 != nil || err3 != nil || rowsN < 0 || n < 0 || n > maxBackup || len(want) != sha256.Size {
		return nil, fmt.Errorf("%w: malformed header %q", ErrBadBackup, strings.TrimSpace(line))
	}
	body, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the rows: %v", ErrBadBackup, err)
	}
	if int64(len(body)) != n {
		return nil, fmt.Errorf("%w: the header says %d bytes of rows, the file holds %d (truncated)", ErrBadBackup, n, len(body))
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], want) {
		return nil, fmt.Errorf("%w: checksum mismatch: the rows are damaged", ErrBadBackup)
	}
	out := make([]api.HistoryJob, 0, rowsN)
	seen := map[Key]bool{}
	for i, ln := range bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n")) {
		if len(ln) == 0 && n == 0 {
			break
		}
		var h api.HistoryJob
		dec := json.NewDecoder(bytes.NewReader(ln))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&h); err != nil {
			return nil, fmt.Errorf("%w: row %d does not decode: %v", ErrBadBackup, i+1, err)
		}
		k := KeyOf(&h)
		if h.ID == 0 || seen[k] {
			return nil, fmt.Errorf("%w: row %d is job %d run %d, empty or repeated", ErrBadBackup, i+1, h.ID, h.Requeues)
		}
		seen[k] = true
		out = append(out, h)
	}
	if len(out) != rowsN {
		return nil, fmt.Errorf("%w: the header says %d rows, the section holds %d", ErrBadBackup, rowsN, len(out))
	}
	return out, nil
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
