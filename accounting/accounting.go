// Package accounting is schedd's store of ended jobs: the records bhist
// and bacct read once a job has left the replicated state.
//
// The leader exports ended jobs here in batches (Put) and only then
// commits the raft command that drops them from the state (state.Purge):
// a job leaves raft only once the store holds it durably. A crash between
// the two exports the same jobs again on the next leader; Put ignores a
// (job id, run) it already holds, so each job is stored once.
//
// The embedded store is SQLite (modernc.org/sqlite, pure Go, so static
// builds stay static) in WAL mode with synchronous=FULL: a committed
// batch survives a power cut. The schema is versioned (migrations) and
// the same for every driver.
//
// Of troupe it imports internal/api only; it must not import sched,
// sched/state or nodelet/....
package accounting

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver

	"github.com/troupe-hpc/troupe/internal/api"
)

// FileName is the SQLite store's file in schedd's data dir.
const FileName = "accounting.db"

// ErrInvalid marks a query that can never succeed as sent.
var ErrInvalid = errors.New("invalid accounting query")

// Drivers schedd takes for accounting { driver = ... }.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// The jobs table holds the columns queries filter and sum on, narrow so
// that a summary over a year scans little; job_records the whole record
// (JSON of api.HistoryJob) bhist shows. Its indexes cover what bacct sums
// (by end time, and by user, account and partition with end time), so a
// summary reads the index alone.
//
// migrations are the schema's versions, in order: version i+1 is
// migrations[i]. Never edit one that shipped; append.
var migrations = []string{
	`CREATE TABLE jobs (
		id          BIGINT NOT NULL,
		run         INTEGER NOT NULL,
		user_name   TEXT NOT NULL,
		uid         INTEGER NOT NULL,
		account     TEXT NOT NULL,
		partition_name TEXT NOT NULL,
		state       TEXT NOT NULL,
		exit_code   INTEGER NOT NULL,
		submitted   BIGINT NOT NULL,
		started     BIGINT NOT NULL,
		ended       BIGINT NOT NULL,
		wait_ns     BIGINT NOT NULL,
		run_ns      BIGINT NOT NULL,
		cpu_ns      BIGINT NOT NULL,
		gpu_hours   DOUBLE PRECISION NOT NULL,
		PRIMARY KEY (id, run)
	);
	CREATE TABLE job_records (
		id     BIGINT NOT NULL,
		run    INTEGER NOT NULL,
		record TEXT NOT NULL,
		PRIMARY KEY (id, run)
	);
	CREATE INDEX jobs_ended ON jobs (ended, user_name, account, partition_name, state, wait_ns, run_ns, cpu_ns, gpu_hours);
	CREATE INDEX jobs_user_ended ON jobs (user_name, ended, account, partition_name, state, wait_ns, run_ns, cpu_ns, gpu_hours);
	CREATE INDEX jobs_account_ended ON jobs (account, ended, user_name, partition_name, state, wait_ns, run_ns, cpu_ns, gpu_hours);
	CREATE INDEX jobs_partition_ended ON jobs (partition_name, ended, user_name, account, state, wait_ns, run_ns, cpu_ns, gpu_hours);
	CREATE INDEX jobs_submitted ON jobs (submitted);`,
	// 2: job arrays: each element is stored as a job of its own, with
	// its array's id and its index (bhist 12 finds array 12's elements).
	`ALTER TABLE jobs ADD COLUMN array_id BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE jobs ADD COLUMN array_index INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX jobs_array ON jobs (array_id, array_index);`,
}

// Store is an open accounting database. It is safe for concurrent use.
type Store struct {
	db     *sql.DB
	driver string
}

// Key names one stored run of a job.
type Key struct {
	ID  uint64 `json:"id"`
	Run int    `json:"run"`
}

// KeyOf is h's key.
func KeyOf(h *api.HistoryJob) Key { return Key{ID: h.ID, Run: h.Requeues} }

// FileMode is the mode of the SQLite store's files (the database and its
// -wal and -shm): they hold every user's ended jobs, reasons the API
// withholds from other users included, so only schedd's user reads them.
const FileMode fs.FileMode = 0o600

// OpenSQLite opens (creating it) the SQLite store at path and brings its
// schema up to date. The database is made (or set to) FileMode before
// SQLite opens it: SQLite gives the -wal and -shm files it makes later
// the database file's mode, whatever the umask.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	if err := privateFiles(path); err != nil {
		return nil, fmt.Errorf("accounting store %s: %w", path, err)
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("accounting store %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises anyway
	s := &Store{db: db, driver: DriverSQLite}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("accounting store %s: %w", path, err)
	}
	return s, nil
}

// privateFiles creates the database file at path with FileMode if it is
// missing, and sets FileMode on it and on the -wal and -shm files an
// older schedd may have left readable.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chmod(FileMode); err != nil {
		return err
	}
	for _, side := range []string{path + "-wal", path + "-shm"} {
		if err := os.Chmod(side, FileMode); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// OpenPostgres connects to the PostgreSQL database dsn names (a URL,
// postgres://user@host/db, or key=value pairs) and brings its schema up
// to date: the same schema and migrations as SQLite's.
func OpenPostgres(ctx context.Context, dsn string) (*Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("accounting store (postgres): %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("accounting store (postgres): %w", err)
	}
	s := &Store{db: db, driver: DriverPostgres}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("accounting store (postgres): %w", err)
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Driver is the store's driver name.
func (s *Store) Driver() string { return s.driver }

// rebind turns ? placeholders into the driver's ($1, $2 … for PostgreSQL).
func (s *Store) rebind(q string) string {
	if s.driver != DriverPostgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// migrate applies the migrations the database lacks, each in its own
// transaction with its version.
func (s *Store) migrate(ctx context.Context) error {
	if s.driver == DriverPostgres {
		// Two servers starting at once migrate one after the other: the
		// lock belongs to one connection's session.
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(7946)`); err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
		defer conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock(7946)`)
	}
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("schema version table: %w", err)
	}
	var v int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return fmt.Errorf("schema version: %w", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this schedd's %d: run a newer schedd", v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for _, stmt := range strings.Split(migrations[i], ";") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				tx.Rollback()
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO schema_version (version) VALUES (?)`), i+1); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	return nil
}

// nanos stores a time as Unix nanoseconds, zero as 0.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Put stores the records in one transaction, committed durably before it
// returns. A record whose (id, run) the store holds already is skipped:
// exporting the same job twice stores it once. It returns how many rows
// were new. A record the store holds another job under (the same id and
// run, another submit) is not stored: the rest is, and the error is a
// *ConflictError naming each such record.
func (s *Store) Put(ctx context.Context, recs []api.HistoryJob) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("accounting put: %w", err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, s.rebind(`INSERT INTO jobs (id, run, user_name, uid, account, partition_name, state, exit_code,
		submitted, started, ended, wait_ns, run_ns, cpu_ns, gpu_hours, array_id, array_index)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id, run) DO NOTHING`))
	if err != nil {
		return 0, fmt.Errorf("accounting put: %w", err)
	}
	defer stmt.Close()
	recStmt, err := tx.PrepareContext(ctx, s.rebind(`INSERT INTO job_records (id, run, record) VALUES (?, ?, ?) ON CONFLICT (id, run) DO NOTHING`))
	if err != nil {
		return 0, fmt.Errorf("accounting put: %w", err)
	}
	defer recStmt.Close()
	added := 0
	var conflicts []string
	var keys []Key
	for i := range recs {
		h := &recs[i]
		blob, err := json.Marshal(h)
		if err != nil {
			return 0, fmt.Errorf("accounting put: job %d: %w", h.ID, err)
		}
		res, err := stmt.ExecContext(ctx, int64(h.ID), h.Requeues, h.User, h.UID, h.Account, h.Partition, string(h.State), h.ExitCode,
			nanos(h.Submitted), nanos(h.Started), nanos(h.Ended), int64(h.Wait), int64(h.Run), int64(h.CPUTime),
			GPUHours(h), int64(h.ArrayID), h.ArrayIndex)
		if err != nil {
			return 0, fmt.Errorf("accounting put: job %d: %w", h.ID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("accounting put: job %d: %w", h.ID, err)
		}
		if n == 0 {
			// Stored already: the same run exported twice is skipped, but
			// another job under the same (id, run) is a conflict this
			// record would silently lose.
			var sub int64
			var user string
			if err := tx.QueryRowContext(ctx, s.rebind(`SELECT submitted, user_name FROM jobs WHERE id = ? AND run = ?`),
				int64(h.ID), h.Requeues).Scan(&sub, &user); err != nil {
				return 0, fmt.Errorf("accounting put: job %d: %w", h.ID, err)
			}
			if sub != nanos(h.Submitted) || user != h.User {
				keys = append(keys, Key{ID: h.ID, Run: h.Requeues})
				conflicts = append(conflicts, fmt.Sprintf("%d run %d (stored: user %s submitted %s; refused: user %s submitted %s)",
					h.ID, h.Requeues, user, time.Unix(0, sub).UTC().Format(time.RFC3339), h.User, h.Submitted.UTC().Format(time.RFC3339)))
			}
			continue
		}
		added++
		if _, err := recStmt.ExecContext(ctx, int64(h.ID), h.Requeues, string(blob)); err != nil {
			return 0, fmt.Errorf("accounting put: job %d: %w", h.ID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("accounting put: commit: %w", err)
	}
	if len(conflicts) > 0 {
		return added, &ConflictError{Keys: keys, Records: conflicts}
	}
	return added, nil
}

// ErrConflict marks records Put did not store because the store holds
// another job under the same id and run: the rest of the batch is
// stored all the same.
var ErrConflict = errors.New("accounting store holds another job under the same id and run")

// ConflictError lists the records Put refused; it is ErrConflict.
type ConflictError struct {
	Keys    []Key
	Records []string // "ID run N (stored: ...; refused: ...)", one for each key
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("accounting put: %v: %s", ErrConflict, strings.Join(e.Records, "; "))
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// MaxJobID is the highest job id the store holds (a job's or an array's;
// 0 when it holds none).
func (s *Store) MaxJobID(ctx context.Context) (uint64, error) {
	var id, arr int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0), COALESCE(MAX(array_id), 0) FROM jobs`).Scan(&id, &arr); err != nil {
		return 0, fmt.Errorf("accounting max job id: %w", err)
	}
	return uint64(max(id, arr)), nil
}

// GPUHours is h's GPUs × run time, in hours.
func GPUHours(h *api.HistoryJob) float64 { return h.GPUs * h.Run.Hours() }

// where is f as a WHERE clause and its arguments.
func where(f *api.HistoryFilter) (string, []any) {
	var conds []string
	var args []any
	list := func(col string, n int, each func(i int) any) {
		if n == 0 {
			return
		}
		conds = append(conds, col+" IN ("+strings.TrimSuffix(strings.Repeat("?,", n), ",")+")")
		for i := range n {
			args = append(args, each(i))
		}
	}
	// Jobs by id (an array's id: its elements) and elements by their
	// array and index, each term answered by an index (the primary key,
	// jobs_array), so that one element of a large array reads one row.
	var picks []string
	if n := len(f.IDs); n > 0 {
		in := " IN (" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")"
		picks = append(picks, "id"+in, "array_id"+in)
		for range 2 {
			for _, id := range f.IDs {
				args = append(args, int64(id))
			}
		}
	}
	for _, e := range f.Elements {
		picks = append(picks, "(array_id = ? AND array_index = ?)")
		args = append(args, int64(e.ID), e.Index)
	}
	if len(picks) > 0 {
		conds = append(conds, "("+strings.Join(picks, " OR ")+")")
	}
	list("user_name", len(f.Users), func(i int) any { return f.Users[i] })
	list("account", len(f.Accounts), func(i int) any { return f.Accounts[i] })
	list("partition_name", len(f.Partitions), func(i int) any { return f.Partitions[i] })
	list("state", len(f.States), func(i int) any { return string(f.States[i]) })
	bound := func(col, op string, t time.Time) {
		if !t.IsZero() {
			conds = append(conds, col+" "+op+" ?")
			args = append(args, t.UnixNano())
		}
	}
	bound("submitted", ">=", f.SubmittedFrom)
	bound("submitted", "<=", f.SubmittedTo)
	bound("ended", ">=", f.EndedFrom)
	bound("ended", "<=", f.EndedTo)
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// Query returns the stored jobs f picks, oldest end first (ties by id).
func (s *Store) Query(ctx context.Context, f api.HistoryFilter) ([]api.HistoryJob, error) {
	out := []api.HistoryJob{}
	err := s.Each(ctx, f, func(h api.HistoryJob) error {
		out = append(out, h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachPage is how many records Each reads in one query (a variable for
// the tests).
var eachPage = 1000

// Each calls each with the stored jobs f picks, oldest end first (ties
// by id, then run), f.Limit the last ones by end. It reads them a page
// of eachPage at a time (keyset: after the last one's end, id and run)
// and calls each once the page's query is closed, so that a long
// history costs a page's memory and a slow reader (an HTTP answer
// written to a slow client) never holds the store's connection, which
// the exports need. An error of each stops the read and is returned as
// it is. The pages are separate reads: a record stored meanwhile after
// the point reached is seen, one before it is not.
func (s *Store) Each(ctx context.Context, f api.HistoryFilter, each func(api.HistoryJob) error) error {
	w, args := where(&f)
	rec := `SELECT (SELECT record FROM job_records r WHERE r.id = jobs.id AND r.run = jobs.run) AS record, ended, id, run FROM jobs`
	if f.Limit > 0 {
		// The last Limit by end, read back in ascending order: at most
		// Limit records, read in one query.
		q := `SELECT record, ended, id, run FROM (` + rec + w + fmt.Sprintf(` ORDER BY ended DESC, id DESC, run DESC LIMIT %d) picked`, f.Limit) +
			` ORDER BY ended, id, run`
		page, _, err := s.page(ctx, q, args)
		if err != nil {
			return err
		}
		for _, h := range page {
			if err := each(h); err != nil {
				return err
			}
		}
		return nil
	}
	var after []any // the last record's ended, id, run
	for {
		cond, pargs := w, slices.Clone(args)
		if after != nil {
			k := "(ended > ? OR (ended = ? AND (id > ? OR (id = ? AND run > ?))))"
			if cond == "" {
				cond = " WHERE " + k
			} else {
				cond += " AND " + k
			}
			pargs = append(pargs, after[0], after[0], after[1], after[1], after[2])
		}
		page, last, err := s.page(ctx, rec+cond+fmt.Sprintf(` ORDER BY ended, id, run LIMIT %d`, eachPage), pargs)
		if err != nil {
			return err
		}
		for _, h := range page {
			if err := each(h); err != nil {
				return err
			}
		}
		if len(page) < eachPage {
			return nil
		}
		after = last
	}
}

// page runs q (record, ended, id, run) and returns its records and the
// last row's ended, id and run.
func (s *Store) page(ctx context.Context, q string, args []any) ([]api.HistoryJob, []any, error) {
	rows, err := s.db.QueryContext(ctx, s.rebind(q), args...)
	if err != nil {
		return nil, nil, fmt.Errorf("accounting query: %w", err)
	}
	defer rows.Close()
	var out []api.HistoryJob
	var ended, id, run int64
	for rows.Next() {
		var blob string
		if err := rows.Scan(&blob, &ended, &id, &run); err != nil {
			return nil, nil, fmt.Errorf("accounting query: %w", err)
		}
		var h api.HistoryJob
		if err := json.Unmarshal([]byte(blob), &h); err != nil {
			return nil, nil, fmt.Errorf("accounting query: a stored record: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("accounting query: %w", err)
	}
	return out, []any{ended, id, run}, nil
}

// Has reports which of keys the store holds.
func (s *Store) Has(ctx context.Context, keys []Key) (map[Key]bool, error) {
	out := map[Key]bool{}
	const chunk = 500
	for len(keys) > 0 {
		n := min(chunk, len(keys))
		part := keys[:n]
		keys = keys[n:]
		args := make([]any, len(part))
		for i, k := range part {
			args[i] = int64(k.ID)
		}
		rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT id, run FROM jobs WHERE id IN (`+strings.TrimSuffix(strings.Repeat("?,", n), ",")+`)`), args...)
		if err != nil {
			return nil, fmt.Errorf("accounting lookup: %w", err)
		}
		for rows.Next() {
			var id int64
			var run int
			if err := rows.Scan(&id, &run); err != nil {
				rows.Close()
				return nil, fmt.Errorf("accounting lookup: %w", err)
			}
			out[Key{ID: uint64(id), Run: run}] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("accounting lookup: %w", err)
		}
	}
	return out, nil
}

// Count is how many rows the store holds.
func (s *Store) Count(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs`).Scan(&n)
	return n, err
}

// Expire deletes the jobs that ended before cutoff (retention) and
// returns how many.
func (s *Store) Expire(ctx context.Context, cutoff time.Time) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("accounting retention: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM job_records WHERE (id, run) IN (SELECT id, run FROM jobs WHERE ended < ?)`), cutoff.UnixNano()); err != nil {
		return 0, fmt.Errorf("accounting retention: %w", err)
	}
	res, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM jobs WHERE ended < ?`), cutoff.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("accounting retention: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("accounting retention: %w", err)
	}
	return n, tx.Commit()
}

// Grouping columns of Summary.
var groupColumns = map[string]string{"user": "user_name", "account": "account", "partition": "partition_name"}

// Summary sums the jobs f picks (f.Limit ignored) per group ("user",
// "account" or "partition"), groups in name order.
func (s *Store) Summary(ctx context.Context, f api.HistoryFilter, group string) ([]api.AccountingRow, error) {
	col, ok := groupColumns[group]
	if !ok {
		return nil, fmt.Errorf("%w: group by %q: want user, account or partition", ErrInvalid, group)
	}
	w, args := where(&f)
	q := `SELECT ` + col + `, SUM(CASE WHEN state = 'REQUEUED' THEN 0 ELSE 1 END),
		SUM(CASE WHEN state = 'COMPLETED' THEN 1 ELSE 0 END),
		SUM(CASE WHEN state IN ('FAILED', 'TIMEOUT') THEN 1 ELSE 0 END),
		CAST(SUM(wait_ns) AS BIGINT), CAST(SUM(run_ns) AS BIGINT), CAST(SUM(cpu_ns) AS BIGINT), SUM(gpu_hours)
		FROM jobs` + w + ` GROUP BY ` + col + ` ORDER BY ` + col
	rows, err := s.db.QueryContext(ctx, s.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("accounting summary: %w", err)
	}
	defer rows.Close()
	out := []api.AccountingRow{}
	for rows.Next() {
		var r api.AccountingRow
		var wait, run, cpu int64
		if err := rows.Scan(&r.Group, &r.Jobs, &r.Completed, &r.Failed, &wait, &run, &cpu, &r.GPUHours); err != nil {
			return nil, fmt.Errorf("accounting summary: %w", err)
		}
		r.Wait, r.Run, r.CPUTime = time.Duration(wait), time.Duration(run), time.Duration(cpu)
		out = append(out, r)
	}
	return out, rows.Err()
}

// GroupOf is h's group name for Summary's group.
func GroupOf(h *api.HistoryJob, group string) string {
	switch group {
	case "account":
		return h.Account
	case "partition":
		return h.Partition
	}
	return h.User
}

// Add sums h into r.
func Add(r *api.AccountingRow, h *api.HistoryJob) {
	if h.State != api.JobRequeued {
		r.Jobs++
	}
	switch h.State {
	case api.JobCompleted:
		r.Completed++
	case api.JobFailed, api.JobTimeout:
		r.Failed++
	}
	r.Wait += h.Wait
	r.Run += h.Run
	r.CPUTime += h.CPUTime
	r.GPUHours += GPUHours(h)
}
