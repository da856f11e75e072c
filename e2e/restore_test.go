package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/client"
)

// bhistAll runs bhist -a against addr and returns the job ids it lists.
func bhistAll(t *testing.T, addr string) []uint64 {
	t.Helper()
	out, err := runEnv(t, []string{"TROUPE_ADDR=" + addr}, bin+"/bhist", "-a")
	if err != nil {
		t.Fatalf("bhist -a: %v\n%s", err, out)
	}
	var ids []uint64
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if id, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// endAndPurge ends n held jobs on c and waits until the accounting
// export has taken every one out of the state (keep_ended 1s).
func endAndPurge(t *testing.T, c *client.Client, n int, cwd string) {
	t.Helper()
	if got := endMany(c, n, 4, cwd); len(got) != n {
		t.Fatalf("%d of %d jobs ended", len(got), n)
	}
	if !waitFor(30*time.Second, func() bool {
		l, err := c.Jobs(context.Background(), 0, 0)
		return err == nil && len(l.Jobs) == 0
	}) {
		t.Fatal("the ended jobs were still in the state 30s after keep_ended")
	}
}

// TestRestoreKeepsHistory is the drill of a lost data dir: 37 jobs end
// and leave the state for the accounting store; badmin snapshot save;
// schedd starts again on an empty data dir and the file is restored:
// bhist -a lists all 37 as before. The same file restored over another
// cluster's store is refused, naming the job that disagrees, and
// changes nothing there.
func TestRestoreKeepsHistory(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	badmin := badmin(t)
	_, sockA := startPlain(t, filepath.Join(dir, "a"), "--keep-ended", "1s")
	ca, err := client.New(sockA)
	if err != nil {
		t.Fatal(err)
	}
	endAndPurge(t, ca, 37, cwd)
	before := bhistAll(t, sockA)
	if len(before) != 37 {
		t.Fatalf("bhist -a lists %d jobs before the save, want 37", len(before))
	}
	file := filepath.Join(dir, "backup.snap")
	if out, err := runEnv(t, []string{"TROUPE_ADDR=" + sockA}, badmin, "snapshot", "save", file); err != nil {
		t.Fatalf("badmin snapshot save: %v\n%s", err, out)
	}

	_, sockB := startPlain(t, filepath.Join(dir, "b"), "--keep-ended", "1s")
	out, err := runEnv(t, []string{"TROUPE_ADDR=" + sockB}, badmin, "snapshot", "restore", file)
	if err != nil {
		t.Fatalf("badmin snapshot restore into a fresh data dir: %v\n%s", err, out)
	}
	if after := bhistAll(t, sockB); !slices.Equal(after, before) {
		t.Fatalf("bhist -a after the restore lists %d jobs %v, before it %d %v", len(after), after, len(before), before)
	}
	if !strings.Contains(out, "37 history records (37 put back") {
		t.Fatalf("badmin snapshot restore says %q", out)
	}

	_, sockC := startPlain(t, filepath.Join(dir, "c"), "--keep-ended", "1s")
	cc, err := client.New(sockC)
	if err != nil {
		t.Fatal(err)
	}
	endAndPurge(t, cc, 3, cwd)
	out, err = runEnv(t, []string{"TROUPE_ADDR=" + sockC}, badmin, "snapshot", "restore", file)
	store := filepath.Join(dir, "c", "accounting.db")
	for _, want := range []string{"the accounting store disagrees with the snapshot", "the accounting store " + store + " holds job 1 (user root",
		"another cluster's store", "nothing was restored", "mv " + store} {
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("restore over another cluster's store: %v\n%s\nwant %q", err, out, want)
		}
	}
	if ids := bhistAll(t, sockC); len(ids) != 3 {
		t.Fatalf("the refused restore changed the other cluster's history: bhist -a lists %v", ids)
	}
}
