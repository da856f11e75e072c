package raftlog

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/sched/state"
)

func open(t testing.TB, dir string) (*Log, *state.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := state.New()
	l, err := Open(ctx, Config{Dir: dir, LogOutput: io.Discard}, st)
	if err != nil {
		t.Fatal(err)
	}
	return l, st
}

func submit(t *testing.T, l *Log, name string) uint64 {
	t.Helper()
	v, err := l.Apply(context.Background(), state.Command{Time: time.Now(), Act: state.Submit{Jobs: []*state.Job{&state.Job{Name: name, Containers: []state.Container{{KernelID: "k"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return v.([]uint64)[0]
}

// An acknowledged write survives a restart, from the log tail and from a
// snapshot plus the tail.
func TestDurableAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir)
	for i := 1; i <= 50; i++ {
		if id := submit(t, l, "a"); id != uint64(i) {
			t.Fatalf("id %d, want %d", id, i)
		}
	}
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		submit(t, l, "b")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, st := open(t, dir)
	defer l.Close()
	jobs := st.Snapshot().Jobs()
	if len(jobs) != 60 || jobs[59].Name != "b" {
		t.Fatalf("after restart: %d jobs, want 60", len(jobs))
	}
	if id := submit(t, l, "c"); id != 61 {
		t.Fatalf("next id %d, want 61", id)
	}
}

func TestRejectedCommandChangesNothing(t *testing.T) {
	l, st := open(t, t.TempDir())
	defer l.Close()
	before, _ := st.Snapshot().Index()
	if _, err := l.Apply(context.Background(), state.Command{Act: state.Kill{Job: state.JobRef{ID: 42}}}); err == nil {
		t.Fatal("killing a missing job succeeded")
	}
	if after, _ := st.Snapshot().Index(); after != before {
		t.Fatalf("index moved %d → %d on a rejected command", before, after)
	}
}
