package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// schedd on a data dir whose raft.db was damaged on disk (one entry's
// bytes flipped, the file truncated, or garbage) exits 1 with one line
// naming the file, not a panic, and serves nothing.
func TestDamagedRaftLogRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"flipped", func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("corrupt-me"), []byte("corrupt-mE")) }},
		{"truncated", func(b []byte) []byte { return b[:len(b)/3] }},
		{"garbage", func(b []byte) []byte { return bytes.Repeat([]byte{0xa5}, len(b)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "raft", "raft.db")
			writeJobs(t, filepath.Dir(db))
			b, err := os.ReadFile(db)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(db, c.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			rc := run([]string{"--data-dir", dir, "--socket", filepath.Join(dir, "s.sock")}, &stdout, &stderr)
			out := stderr.String()
			t.Logf("exit %d: %s", rc, out)
			if rc != 1 {
				t.Errorf("exit %d, want 1", rc)
			}
			if lines := strings.Count(strings.TrimSpace(out), "\n") + 1; lines != 1 || !strings.HasPrefix(out, "schedd: raft data damaged: "+db) {
				t.Errorf("want one line \"schedd: raft data damaged: %s…\", got %d lines: %q", db, lines, out)
			}
			if strings.Contains(out, "goroutine") || strings.Contains(out, "panic") {
				t.Errorf("a panic: %s", out)
			}
			if stdout.Len() > 0 {
				t.Errorf("schedd printed %q: it served", stdout.String())
			}
		})
	}
}

func writeJobs(t *testing.T, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := raftlog.Open(ctx, raftlog.Config{Dir: dir, LogOutput: io.Discard}, state.New())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "corrupt-me", "b"} {
		if _, err := l.Apply(ctx, state.Command{Time: time.Now(), Act: state.Submit{Jobs: []*state.Job{&state.Job{Name: name, Containers: []state.Container{{KernelID: "k"}}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
