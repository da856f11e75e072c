package raftlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/sched/state"
)

// writeLog leaves a real raft.db in dir: 20 submits, the 7th named
// "corrupt-me", then a clean close. It returns that submit's raft index.
func writeLog(t *testing.T, dir string) (marked uint64) {
	t.Helper()
	l, st := open(t, dir)
	for i := 1; i <= 20; i++ {
		name := "job"
		if i == 7 {
			name = "corrupt-me"
		}
		submit(t, l, name)
		if i == 7 {
			marked, _ = st.Snapshot().Index()
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return marked
}

func openErr(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := Open(ctx, Config{Dir: dir, LogOutput: io.Discard}, state.New())
	if err == nil {
		l.Close()
	}
	return err
}

// A raft.db damaged on disk is refused at start with one line naming the
// file (and the entry, where one entry is bad), never replayed with a
// hole and never a panic.
func TestCorruptLogRefused(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, db string)
		want   []string // "entry" stands for "entry N", N the damaged one
	}{
		{"flipped byte in a submit's name", func(t *testing.T, db string) {
			replaceAll(t, db, "corrupt-me", "corrupt-mE")
		}, []string{"entry", "raft.db"}},
		{"flipped bytes breaking the entry's json", func(t *testing.T, db string) {
			replaceAll(t, db, `"corrupt-me"`, `"corrupt-me `)
		}, []string{"entry", "raft.db"}},
		{"truncated", func(t *testing.T, db string) {
			fi, err := os.Stat(db)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(db, fi.Size()/3); err != nil {
				t.Fatal(err)
			}
		}, []string{"raft.db"}},
		{"garbage", func(t *testing.T, db string) {
			fi, err := os.Stat(db)
			if err != nil {
				t.Fatal(err)
			}
			b := bytes.Repeat([]byte("garbage!"), int(fi.Size()/8))
			if err := os.WriteFile(db, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, []string{"raft.db"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			marked := writeLog(t, dir)
			db := filepath.Join(dir, "raft.db")
			c.damage(t, db)
			err := openErr(dir)
			if err == nil {
				t.Fatal("a damaged raft.db was opened")
			}
			msg := err.Error()
			t.Logf("refused: %s", msg)
			for _, w := range c.want {
				if w == "entry" {
					w = fmt.Sprintf("entry %d:", marked)
				}
				if !strings.Contains(msg, w) {
					t.Errorf("refusal %q does not name %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("refusal is not one line: %q", msg)
			}
		})
	}
}

func replaceAll(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s does not hold %q", path, old)
	}
	if err := os.WriteFile(path, bytes.ReplaceAll(b, []byte(old), []byte(new)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Entries written before the checksum (bare JSON) still decode; a broken
// one is refused, never skipped.
func TestDecodeCommand(t *testing.T) {
	good, err := encodeCommand(state.Command{Act: state.Kill{Job: state.JobRef{ID: 3}}}, state.SchemaVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"checksummed", good, true},
		{"legacy json", []byte(`{"kind":"kill","kill":3}`), true},
		{"legacy json cut", []byte(`{"kind":"kill","ki`), false},
		{"empty", nil, false},
		{"short header", good[:3], false},
		{"unknown format", append([]byte{0x7f}, good[1:]...), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeCommand(c.data)
			if (err == nil) != c.ok {
				t.Fatalf("decode: %v, want ok=%v", err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrBadEntry) {
				t.Fatalf("%v is not ErrBadEntry", err)
			}
		})
	}
}

// An entry the FSM cannot decode while running stops the log: it is
// never skipped, nothing after it is applied, and Failed says so.
func TestUndecodableEntryStopsTheLog(t *testing.T) {
	l, st := open(t, t.TempDir())
	defer l.Close()
	submit(t, l, "before")
	if err := l.raft.Apply([]byte("\x01\x00\x00\x00\x00{not json"), time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("the log did not fail on an undecodable entry")
	}
	if !errors.Is(l.Err(), ErrDamaged) || !strings.Contains(l.Err().Error(), "entry ") {
		t.Fatalf("Err = %v", l.Err())
	}
	_, err := l.Apply(context.Background(), state.Command{Time: time.Now(), Act: state.Submit{Jobs: []*state.Job{&state.Job{Name: "after"}}}})
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("a submit after the bad entry: %v, want ErrDamaged", err)
	}
	if n := len(st.Snapshot().Jobs()); n != 1 {
		t.Fatalf("%d jobs after the bad entry, want 1 (nothing applied past it)", n)
	}
}

// An entry a newer schedd wrote (a schema version above SchemaVersion)
// stops the log with ErrSchema: it is never skipped or half-applied.
func TestNewerSchemaEntryStopsTheLog(t *testing.T) {
	l, st := open(t, t.TempDir())
	defer l.Close()
	submit(t, l, "before")
	newer := fmt.Sprintf(`{"v":%d,"kind":"submit","submit":{"name":"from the future"}}`, state.SchemaVersion+1)
	if err := l.raft.Apply([]byte(newer), time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("the log did not stop on an entry of a newer schema")
	}
	if !errors.Is(l.Err(), state.ErrSchema) || !strings.Contains(l.Err().Error(), "reads schema versions up to") {
		t.Fatalf("Err = %v, want ErrSchema naming the versions", l.Err())
	}
	if n := len(st.Snapshot().Jobs()); n != 1 {
		t.Fatalf("%d jobs, want 1: the newer entry must not be applied", n)
	}
	// What this schedd writes carries its version.
	b, err := encodeCommand(state.Command{Act: state.Kill{Job: state.JobRef{ID: 1}}}, state.SchemaVersion)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), fmt.Sprintf(`"v":%d`, state.SchemaVersion)) {
		t.Fatalf("encoded entry %q carries no schema version", b)
	}
}

// A snapshot of a newer schema is refused by name; one written before
// versions existed (none) reads as version 1.
func TestSnapshotSchema(t *testing.T) {
	st := state.New()
	if err := st.Restore(state.Dump{Version: state.SchemaVersion + 1}); !errors.Is(err, state.ErrSchema) {
		t.Fatalf("restore of a newer snapshot: %v, want ErrSchema", err)
	}
	if err := st.Restore(state.Dump{}); err != nil {
		t.Fatalf("restore of an unversioned snapshot: %v", err)
	}
	if v := st.Snapshot().Dump().Version; v != state.OldestSchema {
		t.Fatalf("a dump carries version %d, want %d (the state's schema)", v, state.OldestSchema)
	}
}
