package raftlog

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/sched/state"
)

// snapshots lists the snapshots raft keeps in dir.
func snapshots(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			n++
		}
	}
	return n
}

// A few entries holding many bytes (batches of jobs) take a snapshot
// once they hold more than snapshotBytes, long before raft's count of
// entries would, and a restart reads it back with what followed.
func TestSnapshotByBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes int64
		want  bool
	}{{"past the bytes", 256 << 10, true}, {"within them", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := openWith(ctx, Config{Dir: dir, LogOutput: io.Discard}, state.New(), faults{snapshotBytes: tc.bytes})
			if err != nil {
				t.Fatal(err)
			}
			big := strings.Repeat("x", 32<<10)
			for i := range 20 { // 20 entries of 4 jobs, 128 KiB each
				var jobs []*state.Job
				for range 4 {
					jobs = append(jobs, &state.Job{Name: "big", Spec: state.Spec{Env: map[string]string{"PAD": big}}, Containers: []state.Container{{KernelID: "k"}}})
				}
				if _, err := l.Apply(ctx, state.Command{Time: time.Now(), Act: state.Submit{Jobs: jobs}}); err != nil {
					t.Fatalf("entry %d: %v", i, err)
				}
			}
			if tc.want {
				eventually.True(t, 10*time.Second, "a snapshot taken for the entries' bytes", func() bool { return snapshots(t, dir) > 0 })
			} else if n := snapshots(t, dir); n != 0 {
				t.Fatalf("%d snapshots of 20 entries within snapshotBytes, want none", n)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l, st := open(t, dir)
			defer l.Close()
			if n := len(st.Snapshot().Jobs()); n != 80 {
				t.Fatalf("%d jobs after the restart, want 80", n)
			}
		})
	}
}
