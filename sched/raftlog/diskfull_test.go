package raftlog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/sched/state"
)

// tmpfs mounts a small tmpfs at a new temporary directory (root only).
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("SKIPPED: cannot mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes a file until the file system refuses.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// A full data dir: a write is refused at once with "schedd data dir
// full" (not "not the raft leader" after the client's retries), every
// write after it too while the disk stays full, nothing is lost, and
// writes work again once space is freed.
func TestDiskFull(t *testing.T) {
	dir := filepath.Join(tmpfs(t, "4m"), "raft")
	l, st := open(t, dir)
	defer l.Close()
	for range 5 {
		submit(t, l, "before")
	}
	filler := filepath.Join(filepath.Dir(dir), "filler")
	fill(t, filler)
	big := strings.Repeat("x", 256<<10)
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		_, err := l.Apply(ctx, state.Command{Time: time.Now(), Act: state.Submit{Jobs: []*state.Job{&state.Job{Name: big, Containers: []state.Container{{KernelID: "k"}}}}}})
		cancel()
		t.Logf("write %d on a full disk: %v after %v", i+1, err, time.Since(start).Round(time.Millisecond))
		if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "schedd data dir full: "+dir) {
			t.Fatalf("write %d on a full disk: %v, want ErrDiskFull naming %s", i+1, err, dir)
		}
	}
	if n := len(st.Snapshot().Jobs()); n != 5 {
		t.Fatalf("%d jobs, want the 5 from before", n)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 10*time.Second, "a write once space is freed", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := l.Apply(ctx, state.Command{Time: time.Now(), Act: state.Submit{Jobs: []*state.Job{&state.Job{Name: "after", Containers: []state.Container{{KernelID: "k"}}}}}})
		return err
	})
	if n := len(st.Snapshot().Jobs()); n != 6 {
		t.Fatalf("%d jobs, want 6", n)
	}
}
