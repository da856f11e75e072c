package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/accounting"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/procfs"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// heldSpec is a job that never runs: submitted held and cancelled, it
// ends at once.
func heldSpec(name string) jobspec.Job {
	return jobspec.Job{Name: name, Image: "host", Command: []string{"true"},
		Cluster:   jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
		Resources: jobspec.Resources{CPU: 1, Memory: 64 << 20}}
}

// endMany submits n held jobs and cancels them, from workers at once; it
// returns the ids that were acknowledged ended (it stops at the first
// error: schedd killed).
func endMany(c *client.Client, n, workers int, cwd string) []uint64 {
	var (
		mu    sync.Mutex
		ended []uint64
		wg    sync.WaitGroup
		next  int
	)
	for range workers {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(heldSpec(fmt.Sprintf("h%d", i))), Hold: true, User: "root", Cwd: cwd})
				if err == nil {
					_, err = c.Kill(ctx, res.JobID)
				}
				cancel()
				if err != nil {
					return
				}
				mu.Lock()
				ended = append(ended, res.JobID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ended
}

// storedCount reads the accounting store of a stopped schedd: how many
// rows each job id has.
func storedCount(t *testing.T, dir string) map[uint64]int {
	t.Helper()
	s, err := accounting.OpenSQLite(context.Background(), filepath.Join(dir, accounting.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.Query(context.Background(), api.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]int{}
	for _, h := range rows {
		out[h.ID]++
	}
	return out
}

// TestAccountingSurvivesKill kills schedd (SIGKILL) while it exports and
// purges a stream of ended jobs, keep_ended 1s, so that some batches are
// cut between the store's commit and the purge command; after a restart
// every ended job leaves raft and is in the store exactly once.
func TestAccountingSurvivesKill(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	args := []string{"--nodes", "1", "--node-cpu", "1", "--node-memory", "1GiB", "--keep-ended", "1s"}
	cmd, addr := startScheddArgs(t, dir, args...)
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []uint64)
	go func() { done <- endMany(c, 100000, 8, cwd) }()
	// Let jobs end and the exporter purge a few batches, then kill.
	if !waitFor(60*time.Second, func() bool {
		h, err := c.History(context.Background(), url.Values{"limit": {"1"}})
		return err == nil && len(h.Jobs) == 1 && h.Jobs[0].ID > 1500
	}) {
		t.Fatal("no job ended in 60s")
	}
	// The first job exported and purged: batches are being handed off,
	// the kill can cut one.
	if !waitFor(30*time.Second, func() bool { _, _, err := c.Job(context.Background(), 1, 0, 0); return err != nil }) {
		t.Fatal("job 1 still in raft 30s after jobs started ending (--keep-ended 1s)")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	acked := <-done
	t.Logf("%d jobs acknowledged ended before the kill", len(acked))
	before := storedCount(t, dir)
	if len(before) == 0 {
		t.Fatal("nothing exported before the kill: the test proves nothing")
	}

	cmd, addr = startScheddArgs(t, dir, args...)
	c, err = client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	var left int
	if !waitFor(60*time.Second, func() bool {
		l, err := c.Jobs(context.Background(), 0, 0)
		left = 0
		for _, j := range l.Jobs {
			if j.State.Terminal() {
				left++
			}
		}
		return err == nil && left == 0
	}) {
		t.Fatalf("%d ended jobs still in raft a minute after the restart", left)
	}
	h, err := c.History(context.Background(), url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	for _, j := range h.Jobs {
		seen[j.ID]++
	}
	for _, id := range acked {
		if seen[id] != 1 {
			t.Errorf("job %d: in bhist %d times, want once", id, seen[id])
		}
	}
	// Stop it and count the rows themselves.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	for id, n := range storedCount(t, dir) {
		if n != 1 {
			t.Errorf("job %d stored %d times", id, n)
		}
	}
	t.Logf("store held %d jobs at the kill, %d after the restart", len(before), len(seen))
}

// rssKiB is a process's resident set in KiB.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	st, err := procfs.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return int(st.RSS) * os.Getpagesize() >> 10
}

// TestEndedJobsFootprint measures what 20,000 ended jobs cost schedd
// with them kept in raft (keep_ended 1h, as every job was before the
// accounting store) and with them handed to the store (keep_ended 1s):
// schedd's RSS and the size of GET /v1/jobs. The figures are logged, not
// asserted; what is asserted is that the handed-off jobs left the state
// and are all in bhist. TROUPE_FOOTPRINT=1 runs it (a few minutes).
func TestEndedJobsFootprint(t *testing.T) {
	if os.Getenv("TROUPE_FOOTPRINT") == "" {
		t.Skip("SKIP: set TROUPE_FOOTPRINT=1 to measure schedd's RSS and GET /v1/jobs with 20,000 ended jobs (a few minutes)")
	}
	const n = 20000
	for _, keep := range []string{"1h", "1s"} {
		dir, cwd := t.TempDir(), t.TempDir()
		cmd, addr := startScheddArgs(t, dir, "--nodes", "1", "--node-cpu", "1", "--node-memory", "1GiB", "--keep-ended", keep)
		c, err := client.New(addr)
		if err != nil {
			t.Fatal(err)
		}
		idle := rssKiB(t, cmd.Process.Pid)
		began := time.Now()
		ended := endMany(c, n, 16, cwd)
		if len(ended) != n {
			t.Fatalf("keep %s: %d of %d jobs ended", keep, len(ended), n)
		}
		took := time.Since(began)
		if keep == "1s" && !waitFor(60*time.Second, func() bool {
			l, err := c.Jobs(context.Background(), 0, 0)
			return err == nil && len(l.Jobs) == 0
		}) {
			t.Fatal("ended jobs still in raft a minute after keep_ended")
		}
		ctx := context.Background()
		list, err := c.Jobs(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(list) // as schedd encodes it
		if err != nil {
			t.Fatal(err)
		}
		// bacct's summary (a small answer: the client gives a whole
		// answer 3 s, too little for 20,000 records on a busy machine).
		a, err := c.Accounting(ctx, url.Values{"group": {"user"}})
		if err != nil || a.Total.Jobs != n {
			t.Fatalf("keep %s: bacct counts %d jobs, %v; want %d", keep, a.Total.Jobs, err, n)
		}
		h, err := c.History(ctx, url.Values{"limit": {"100"}})
		if err != nil || len(h.Jobs) != 100 || h.Jobs[99].State != api.JobCancelled {
			t.Fatalf("keep %s: bhist -n 100: %d jobs, %v", keep, len(h.Jobs), err)
		}
		time.Sleep(3 * time.Second) // let the collector run
		t.Logf("keep_ended %s: %d ended jobs in %v; schedd RSS idle %d MiB, after %d MiB; GET /v1/jobs %d bytes",
			keep, n, took.Round(time.Second), idle/1024, rssKiB(t, cmd.Process.Pid)/1024, len(body))
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
}
