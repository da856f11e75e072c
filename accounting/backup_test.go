package accounting

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// history is a store's whole content, oldest end first.
func history(t *testing.T, s *Store) []api.HistoryJob {
	t.Helper()
	out, err := s.Query(context.Background(), api.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBackupRoundTrip: a store's backup, read back and put into an
// empty store of every driver (SQLite's into PostgreSQL too), rebuilds
// every row, records and summaries alike; putting it into the store it
// came from adds nothing.
func TestBackupRoundTrip(t *testing.T) {
	ctx := context.Background()
	recs := []api.HistoryJob{
		rec(1, "alice", "phys", "cpu", api.JobCompleted, t0),
		rec(2, "bob", "chem", "gpu", api.JobFailed, t0.Add(time.Minute)),
		rec(3, "alice", "phys", "cpu", api.JobCancelled, t0.Add(2*time.Minute)),
	}
	requeued := rec(2, "bob", "chem", "gpu", api.JobCompleted, t0.Add(3*time.Minute))
	requeued.Requeues = 1
	elem := rec(5, "carol", "bio", "cpu", api.JobCompleted, t0.Add(4*time.Minute))
	elem.ArrayID, elem.ArrayIndex = 4, 1
	elem.Reason = "line one\nline two" // a newline in a record stays inside its line
	recs = append(recs, requeued, elem)
	src := openSQLite(t)
	if _, err := src.Put(ctx, recs); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	n, err := src.Backup(ctx, &file)
	if err != nil || n != len(recs) {
		t.Fatalf("backup: %d rows, %v; want %d", n, err, len(recs))
	}
	if !strings.HasPrefix(file.String(), "troupe-accounting/1 rows=5 ") {
		t.Fatalf("backup starts %q", strings.SplitN(file.String(), "\n", 2)[0])
	}
	// The section ends where its header says: what follows is the
	// reader's, untouched.
	br := bufio.NewReader(bytes.NewReader(append(bytes.Clone(file.Bytes()), "next"...)))
	got, err := ReadBackup(br)
	if err != nil || len(got) != len(recs) {
		t.Fatalf("read back: %d rows, %v", len(got), err)
	}
	if rest, _ := br.ReadString(0); rest != "next" {
		t.Fatalf("the reader read past the section: %q left", rest)
	}
	want := history(t, src)
	eachDriver(t, func(t *testing.T, dst *Store) {
		if added, err := dst.Put(ctx, got); err != nil || added != len(recs) {
			t.Fatalf("put the backup: %d added, %v", added, err)
		}
		back := history(t, dst)
		if len(back) != len(want) {
			t.Fatalf("%d rows after the restore, want %d", len(back), len(want))
		}
		for i := range want {
			if KeyOf(&back[i]) != KeyOf(&want[i]) || back[i].Reason != want[i].Reason || !back[i].Submitted.Equal(want[i].Submitted) ||
				back[i].User != want[i].User || back[i].ArrayID != want[i].ArrayID {
				t.Fatalf("row %d: %+v, want %+v", i, back[i], want[i])
			}
		}
		for _, group := range []string{"user", "account"} {
			a, _ := src.Summary(ctx, api.HistoryFilter{}, group)
			b, _ := dst.Summary(ctx, api.HistoryFilter{}, group)
			if len(a) != len(b) {
				t.Fatalf("summary by %s: %v, want %v", group, b, a)
			}
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("summary by %s: %+v, want %+v", group, b[i], a[i])
				}
			}
		}
	})
	if added, err := src.Put(ctx, got); err != nil || added != 0 {
		t.Fatalf("putting a store's own backup back: %d added, %v", added, err)
	}
}

// TestBackupEmpty: an empty store's backup is a header alone and reads
// back as no rows.
func TestBackupEmpty(t *testing.T) {
	s := openSQLite(t)
	var file bytes.Buffer
	if n, err := s.Backup(context.Background(), &file); err != nil || n != 0 {
		t.Fatalf("backup of an empty store: %d, %v", n, err)
	}
	got, err := ReadBackup(bufio.NewReader(&file))
	if err != nil || len(got) != 0 {
		t.Fatalf("read back: %v, %v", got, err)
	}
}

// TestReadBackupRefuses: a damaged, truncated or malformed section, or
// one that repeats a run, is refused whole.
func TestReadBackupRefuses(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t)
	if _, err := s.Put(ctx, []api.HistoryJob{rec(1, "alice", "phys", "cpu", api.JobCompleted, t0), rec(2, "bob", "chem", "gpu", api.JobFailed, t0)}); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := s.Backup(ctx, &file); err != nil {
		t.Fatal(err)
	}
	good := file.Bytes()
	nl := bytes.IndexByte(good, '\n')
	flip := bytes.Clone(good)
	flip[nl+5] ^= 0x01
	// A section that is whole by its checksum but repeats a run.
	rows := good[nl+1:]
	first := rows[:bytes.IndexByte(rows, '\n')+1]
	twice := append(append([]byte{}, first...), first...)
	var dup bytes.Buffer
	dup.WriteString(sectionHeader(2, twice))
	dup.Write(twice)
	cases := map[string][]byte{
		"bit flipped":   flip,
		"truncated":     good[:len(good)-3],
		"no header":     rows,
		"bad rows":      bytes.Replace(bytes.Clone(good), []byte("rows=2"), []byte("rows=x"), 1),
		"wrong count":   bytes.Replace(bytes.Clone(good), []byte("rows=2"), []byte("rows=3"), 1),
		"repeated run":  dup.Bytes(),
		"unknown field": append([]byte(sectionHeader(1, []byte(`{"id":1,"bogus":2}`+"\n"))), `{"id":1,"bogus":2}`+"\n"...),
	}
	for name, b := range cases {
		if _, err := ReadBackup(bufio.NewReader(bytes.NewReader(b))); !errors.Is(err, ErrBadBackup) {
			t.Errorf("%s: %v, want ErrBadBackup", name, err)
		}
	}
}

// sectionHeader is a backup section's header line for body.
func sectionHeader(rows int, body []byte) string {
	sum := sha256.Sum256(body)
	return fmt.Sprintf("troupe-accounting/1 rows=%d bytes=%d sha256=%s\n", rows, len(body), hex.EncodeToString(sum[:]))
}

// TestDisagreements: a store holding another job under an id (another
// owner or another submit time, at any run) disagrees; the same job
// (even at another run) does not; ids the store lacks do not either.
func TestDisagreements(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := rec(1, "alice", "phys", "cpu", api.JobCompleted, t0)
		b := rec(2, "bob", "chem", "gpu", api.JobFailed, t0)
		b2 := b
		b2.Requeues = 1
		if _, err := s.Put(ctx, []api.HistoryJob{a, b, b2}); err != nil {
			t.Fatal(err)
		}
		same := []Identity{IdentityOf(&a), IdentityOf(&b), {ID: 99, User: "zoe", Submitted: t0}}
		if dis, n, err := s.Disagreements(ctx, same, 5); err != nil || n != 0 || len(dis) != 0 {
			t.Fatalf("the same jobs disagree: %v %d %v", dis, n, err)
		}
		other := []Identity{
			{ID: 1, User: "alice", Submitted: a.Submitted.Add(time.Nanosecond)},
			{ID: 2, User: "mallory", Submitted: b.Submitted},
		}
		dis, n, err := s.Disagreements(ctx, other, 1)
		if err != nil || n != 3 || len(dis) != 1 {
			t.Fatalf("another cluster's jobs: %v, %d in all, %v; want 3 rows (job 2 at two runs)", dis, n, err)
		}
		if dis[0].Stored.ID != 1 || dis[0].Stored.User != "alice" || !dis[0].Stored.Submitted.Equal(a.Submitted) || dis[0].Want != other[0] {
			t.Fatalf("first disagreement %+v", dis[0])
		}
		if !strings.Contains(dis[0].Stored.String(), "job 1 (user alice, submitted 2026-10-31T23:57:00Z)") {
			t.Fatalf("identity reads %q", dis[0].Stored)
		}
	})
}

// TestCovers: a job is covered by its own row or, for an array, by an
// element's.
func TestCovers(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		elem := rec(5, "carol", "bio", "cpu", api.JobCompleted, t0)
		elem.ArrayID, elem.ArrayIndex = 4, 1
		if _, err := s.Put(ctx, []api.HistoryJob{rec(1, "alice", "phys", "cpu", api.JobCompleted, t0), elem}); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[uint64]bool{1: true, 4: true, 5: true, 2: false, 3: false} {
			if got, err := s.Covers(ctx, id); err != nil || got != want {
				t.Errorf("covers %d: %v, %v; want %v", id, got, err, want)
			}
		}
	})
}
