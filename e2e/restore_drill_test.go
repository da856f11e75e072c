package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// TestRestoreDrill is the restore drill an operator runs: badmin
// snapshot save, then more work (jobs ending, starting, submitted,
// cancelled, some ended jobs leaving the state for the accounting
// store), then badmin snapshot restore on the running cluster. Every
// job's state is then checked against what happened: ended jobs stay
// ended with their outcome and exit code and never run again (each
// output file holds one run), running jobs keep their containers and
// are still running, no id is handed out twice, and the nodelets see
// the restored state at once.
func TestRestoreDrill(t *testing.T) {
	needRunc(t)
	ba := badmin(t)
	c := startCluster(t, 1, "4", "--keep-ended", "2s")
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o777) // the jobs write their output here as the user
	out := func(name string) string { return filepath.Join(dir, name+".out") }
	runs := func(name string) int {
		b, _ := os.ReadFile(out(name))
		return strings.Count(string(b), "run\n")
	}
	// Each job prints "run" to its output file, which a second run
	// would append to.
	once := func(name, script string) string {
		return fmt.Sprintf(`
job %q {
  image   = "host"
  command = ["sh", "-c", %q]
  output  = %q
  resources {
    cpu    = 1
    memory = "64MiB"
  }
}`, name, "echo run; "+script, name+".out")
	}

	cl, err := client.New(c.addr)
	if err != nil {
		t.Fatal(err)
	}
	// outcome is a job's state and exit code, from the state or, once
	// it left it, from the accounting store (inState false).
	outcome := func(id uint64) (st api.JobState, exit int, inState bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		j, _, err := cl.Job(ctx, id, 0, 0)
		if err == nil {
			return j.State, j.ExitCode, true
		}
		if !client.IsNotFound(err) {
			t.Fatalf("job %d: %v", id, err)
		}
		h, err := cl.History(ctx, url.Values{"id": {strconv.FormatUint(id, 10)}})
		if err != nil || len(h.Jobs) != 1 {
			t.Fatalf("bhist %d: %+v, %v", id, h.Jobs, err)
		}
		return h.Jobs[0].State, h.Jobs[0].ExitCode, false
	}
	// Before the save: one ended, one running to end after it, one
	// running on, one held to be released, one held to be cancelled.
	early, _ := c.submit(dir, "early", once("early", "exit 4"))
	ending, _ := c.submit(dir, "ending", once("ending", "sleep 3"))
	long, _ := c.submit(dir, "long", once("long", "sleep 600"))
	released, _ := c.submit(dir, "released", once("released", "exit 0"), "-H")
	cancelled, _ := c.submit(dir, "cancelled", once("cancelled", "true"), "-H")
	if !waitFor(time.Minute, func() bool { st, _, _ := outcome(early); return st.Terminal() }) {
		t.Fatalf("job %d did not end", early)
	}
	c.waitState(ending, time.Minute, func(j api.Job) bool { return j.State == api.JobRunning })
	longJob := c.waitState(long, time.Minute, func(j api.Job) bool { return j.State == api.JobRunning })

	snap := filepath.Join(dir, "drill.snap")
	if _, errOut, code := c.run(dir, filepath.Base(ba), "snapshot", "save", snap); code != 0 {
		t.Fatalf("badmin snapshot save: exit %d: %s", code, errOut)
	}

	// After the save.
	if _, errOut, code := c.run(dir, "brelease", strconv.FormatUint(released, 10)); code != 0 {
		t.Fatalf("brelease: %s", errOut)
	}
	if _, errOut, code := c.run(dir, "bkill", strconv.FormatUint(cancelled, 10)); code != 0 {
		t.Fatalf("bkill: %s", errOut)
	}
	after, _ := c.submit(dir, "after", once("after", "exit 2"))
	started, _ := c.submit(dir, "started", once("started", "sleep 600"))
	for _, id := range []uint64{ending, released, after} {
		if !waitFor(time.Minute, func() bool { st, _, _ := outcome(id); return st.Terminal() }) {
			t.Fatalf("job %d did not end", id)
		}
	}
	startedJob := c.waitState(started, time.Minute, func(j api.Job) bool { return j.State == api.JobRunning })
	// The first ones leave the state for the accounting store (past
	// --keep-ended): the restore must take their outcome from there.
	if !waitFor(30*time.Second, func() bool {
		_, _, a := outcome(early)
		_, _, b := outcome(ending)
		return !a && !b
	}) {
		t.Fatalf("jobs %d and %d still in the state past --keep-ended", early, ending)
	}
	type end struct {
		state api.JobState
		exit  int
	}
	want := map[uint64]end{}
	for _, id := range []uint64{early, ending, released, cancelled, after} {
		st, exit, _ := outcome(id)
		want[id] = end{st, exit}
	}
	if want[early] != (end{api.JobFailed, 4}) || want[after] != (end{api.JobFailed, 2}) || want[ending].state != api.JobCompleted {
		t.Fatalf("before the restore: %+v", want)
	}

	o, errOut, code := c.run(dir, filepath.Base(ba), "snapshot", "restore", snap)
	if code != 0 {
		t.Fatalf("badmin snapshot restore: exit %d: %s", code, errOut)
	}
	t.Logf("badmin snapshot restore: %s", strings.TrimSpace(o))

	// A job submitted after the restore runs to its end: the scheduler
	// and the nodelet have seen the restored state by then.
	next, _ := c.submit(dir, "next", once("next", "true"))
	if next <= started {
		t.Errorf("the first job after the restore got id %d, handed out before (the last was %d)", next, started)
	}
	c.waitState(next, time.Minute, func(j api.Job) bool { return j.State == api.JobCompleted })

	for id, w := range want {
		if st, exit, _ := outcome(id); st != w.state || exit != w.exit {
			t.Errorf("job %d after the restore: %s exit %d; it had ended %s exit %d", id, st, exit, w.state, w.exit)
		}
	}
	for id, want := range map[uint64]api.Job{long: longJob, started: startedJob} {
		j := c.job(id)
		if j.State != api.JobRunning || !j.Started.Equal(want.Started) {
			t.Errorf("job %d after the restore: %s (%s), started %s; want it still running, started %s", id, j.State, j.Reason, j.Started, want.Started)
		}
	}
	for name, n := range map[string]int{"early": 1, "ending": 1, "long": 1, "released": 1, "cancelled": 0, "after": 1, "started": 1, "next": 1} {
		if got := runs(name); got != n {
			t.Errorf("%s ran %d times, want %d", name, got, n)
		}
	}
	for _, id := range []uint64{long, started} {
		if _, errOut, code := c.run(dir, "bkill", strconv.FormatUint(id, 10)); code != 0 {
			t.Fatalf("bkill %d: %s", id, errOut)
		}
		if j := c.waitState(id, time.Minute, func(j api.Job) bool { return j.State.Terminal() }); j.State != api.JobCancelled {
			t.Errorf("job %d, adopted after the restore, bkilled: %s (%s), want CANCELLED", id, j.State, j.Reason)
		}
	}
	if strings.Contains(c.log.String(), "container lost") {
		t.Errorf("a container was reported lost:\n%s", c.log)
	}
}

// TestRestoreEmptyDataDir follows schedd(8) RECOVERY for a lone server
// whose data disk is lost: schedd is stopped, its raft directory and its
// accounting store removed, and it starts again on the emptied data dir
// while its nodelet runs on; the last backup is then restored. While
// schedd's state holds no job, the nodelet stops nothing. After the
// restore, in the adoption window: the job the backup shows running runs
// on, in the same process; the job the backup shows HELD that started
// since is adopted (one run, the same process); the job the backup shows
// HELD that ran and ended since ends with its true outcome (exit 3, from
// the end the nodelet kept), never run again; and the job submitted
// after the backup, still running, is adopted from the nodelet's copy:
// it runs on in the same process under its own id and is killed as any
// job; the job submitted after the backup that ended before the restore
// is recorded from the copy the nodelet kept with its end (exit 5, in
// bhist), never run again. Job ids do not go back. The nodelet used to stop every container
// on the empty state, schedd handed out the backup's next id again, the
// ended job ran a second time, and the later job was stopped with no
// record.
func TestRestoreEmptyDataDir(t *testing.T) {
	ba := badmin(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	sock := filepath.Join(dir, "schedd.sock")
	// start runs schedd on data; stop ends it (the cleanup too).
	start := func() (cl *client.Client, stop func()) {
		cmd := exec.Command(bin+"/schedd", "--data-dir", data, "--socket", sock, "--keep-ended", "1s")
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		stop = func() { once.Do(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }) }
		t.Cleanup(stop)
		select {
		case <-scanAddr(out):
		case <-time.After(60 * time.Second):
			t.Fatal("schedd did not start in 60s")
		}
		if cl, err = client.New("unix://" + sock); err != nil {
			t.Fatal(err)
		}
		return cl, stop
	}
	cl, stop := start()
	var nlog syncBuffer
	nl := exec.Command(bin+"/nodelet", "--addr", "unix://"+sock, "--name", "r1", "--state-dir", filepath.Join(dir, "n1"),
		"--runtime", "process", "--cpu", "4", "--memory", "4GiB", "--heartbeat", "500ms")
	nl.Stderr = &nlog
	if err := nl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = nl.Process.Signal(syscall.SIGTERM)
		_ = nl.Wait()
		if t.Failed() {
			t.Logf("nodelet log:\n%s", nlog.String())
		}
	})

	ctx := context.Background()
	submitHeld := func(script string, hold bool) uint64 {
		t.Helper()
		res, err := cl.Submit(ctx, api.SubmitRequest{Cwd: dir, Hold: hold, Spec: wire.ToAPI(jobspec.Job{Name: "r", Image: "host", Command: []string{"sh", "-c", script},
			Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode}, Resources: jobspec.Resources{CPU: 1, Memory: 32 << 20}})})
		if err != nil {
			t.Fatal(err)
		}
		return res.JobID
	}
	submit := func(script string) uint64 { t.Helper(); return submitHeld(script, false) }
	jobState := func(id uint64) api.JobState {
		j, _, err := cl.Job(ctx, id, 0, 0)
		if err != nil {
			return ""
		}
		return j.State
	}
	pids := func(marker string) string {
		out, _ := exec.Command("pgrep", "-f", marker).Output()
		return strings.TrimSpace(string(out))
	}
	admin := []string{"TROUPE_ADDR=unix://" + sock}
	keptMarker, lostMarker := "sleep 600; : kept "+dir, "sleep 600; : lost "+dir
	kept := submit(keptMarker) // running at the backup, runs on
	if !waitFor(time.Minute, func() bool { return jobState(kept) == api.JobRunning && pids(keptMarker) != "" }) {
		t.Fatalf("job %d did not start", kept)
	}
	keptPID := pids(keptMarker)
	// Held at the backup, released and started after it: the restored
	// state shows it HELD while the node runs it. It is adopted (the same
	// process, one run in its output, the same start), never run twice.
	heldOut := filepath.Join(dir, "held.out")
	heldMarker := "echo run >> " + heldOut + "; sleep 600; : held " + dir
	held := submitHeld(heldMarker, true)
	endedOut := filepath.Join(dir, "ended.out")
	ended := submitHeld("echo run >> "+endedOut+"; exit 3", true)
	snap := filepath.Join(dir, "backup.snap")
	if o, err := runEnv(t, admin, ba, "snapshot", "save", snap); err != nil {
		t.Fatalf("badmin snapshot save: %v: %s", err, o)
	}
	if _, err := cl.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if !waitFor(time.Minute, func() bool { return jobState(held) == api.JobRunning && pids(heldMarker) != "" }) {
		t.Fatalf("job %d, released after the backup, did not start", held)
	}
	heldPID := pids(heldMarker)
	heldJob, _, err := cl.Job(ctx, held, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Release(ctx, ended); err != nil { // held at the backup: runs and ends after it
		t.Fatal(err)
	}
	lateOut := filepath.Join(dir, "late.out")
	late := submit("echo run >> " + lateOut + "; exit 5") // submitted after the backup, ended before the restore
	lost := submit(lostMarker)                            // submitted after the backup, still running
	// An array submitted after the backup: element 1 exits 4, element 2
	// runs on.
	arrMarker := "sleep 600; : array " + dir
	arr, err := cl.Submit(ctx, api.SubmitRequest{Cwd: dir, Spec: wire.ToAPI(jobspec.Job{Name: "arr", Image: "host",
		Command: []string{"sh", "-c", `if [ "$LSB_JOBINDEX" = 1 ]; then exit 4; fi; ` + arrMarker},
		Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode}, Resources: jobspec.Resources{CPU: 1, Memory: 32 << 20},
		Array: &jobspec.Array{Range: "1-2"}})})
	if err != nil {
		t.Fatal(err)
	}
	if !waitFor(time.Minute, func() bool { return pids(arrMarker) != "" }) {
		t.Fatalf("array %d's element 2 did not start", arr.JobID)
	}
	arrPID := pids(arrMarker)
	for _, id := range []uint64{ended, late} {
		if !waitFor(time.Minute, func() bool { return jobState(id) == "" }) {
			t.Fatalf("job %d not purged to the accounting store", id)
		}
	}
	if !waitFor(time.Minute, func() bool { return pids(lostMarker) != "" }) {
		t.Fatalf("job %d did not start", lost)
	}
	lostPID := pids(lostMarker)
	lostJob, _, err := cl.Job(ctx, lost, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if err := os.Rename(filepath.Join(data, "raft"), filepath.Join(dir, "raft.damaged")); err != nil {
		t.Fatal(err)
	}
	// The disk is lost: the accounting store too (the backup's copy of it
	// refills it, without what ended since).
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(data, "accounting.db"+suffix)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	cl, _ = start()
	if !waitFor(time.Minute, func() bool { return strings.Contains(nlog.String(), "keeping the containers running here") }) {
		t.Fatal("the nodelet did not answer the empty state")
	}
	if o, err := runEnv(t, admin, ba, "snapshot", "restore", snap); err != nil {
		t.Fatalf("badmin snapshot restore: %v: %s", err, o)
	}
	// The restored state does not hold the later job: the nodelet's
	// announcement carries its copy, from which it is adopted, running on.
	if !waitFor(30*time.Second, func() bool { return jobState(lost) == api.JobRunning }) {
		t.Fatalf("job %d, submitted after the backup and running on the node, after the restore: %q; want RUNNING, adopted", lost, jobState(lost))
	}
	if st := jobState(kept); st != api.JobRunning || pids(keptMarker) != keptPID {
		t.Fatalf("job %d after the restore: %s, processes %q; want it RUNNING in the same process %s", kept, st, pids(keptMarker), keptPID)
	}
	if !waitFor(30*time.Second, func() bool { return jobState(held) == api.JobRunning }) {
		t.Fatalf("job %d, HELD in the backup and running on the node, after the restore: %s; want RUNNING, adopted", held, jobState(held))
	}
	// Its start is the node's, moved onto schedd's clock by each report's
	// own measure of the skew: equal within the reports' transit.
	if j, _, err := cl.Job(ctx, held, 0, 0); err != nil || j.Started.Sub(heldJob.Started).Abs() > time.Second || j.Requeues != 0 || j.Containers[0].Node != "r1" {
		t.Fatalf("job %d adopted as %+v (%v); want started %v, run 0, on r1", held, j, err, heldJob.Started)
	}
	if !waitFor(10*time.Second, func() bool {
		b, _ := os.ReadFile(heldOut)
		return strings.Count(string(b), "run") == 1 && pids(heldMarker) == heldPID && jobState(held) == api.JobRunning
	}) {
		b, _ := os.ReadFile(heldOut)
		t.Fatalf("job %d after the restore: output %q, processes %q (was %s), state %s; want one run, the same process, RUNNING", held, b, pids(heldMarker), heldPID, jobState(held))
	}
	// The job that ran and ended since the backup: its true outcome, from
	// the end the nodelet kept; never run again.
	if !waitFor(30*time.Second, func() bool { return jobState(ended) == api.JobFailed }) {
		t.Fatalf("job %d, HELD in the backup, ended (exit 3) since: %q after the restore; want FAILED", ended, jobState(ended))
	}
	if j, _, err := cl.Job(ctx, ended, 0, 0); err != nil || j.ExitCode != 3 || strings.Contains(j.Reason, "after the backup") {
		t.Fatalf("job %d after the restore: %+v (%v); want exit 3 as it ended, not a restore's reason", ended, j, err)
	}
	if j, _, err := cl.Job(ctx, lost, 0, 0); err != nil || j.User != lostJob.User || j.UID != lostJob.UID || j.Containers[0].Node != "r1" || pids(lostMarker) != lostPID {
		t.Fatalf("job %d adopted as %+v (%v), processes %q (was %s); want it on r1 as its user, the same process", lost, j, err, pids(lostMarker), lostPID)
	}
	// The job submitted after the backup that ended before the restore:
	// recorded from the copy of the job the nodelet kept with its end,
	// under its own id, as it ended; in bhist too.
	if !waitFor(30*time.Second, func() bool { return jobState(late) == api.JobFailed }) {
		t.Fatalf("job %d, submitted after the backup, ended (exit 5) before the restore: %q after it; want FAILED, recorded", late, jobState(late))
	}
	if j, _, err := cl.Job(ctx, late, 0, 0); err != nil || j.ExitCode != 5 || j.Containers[0].Node != "r1" || j.Started.IsZero() || j.Ended.Before(j.Started) || j.UID != lostJob.UID {
		t.Fatalf("job %d recorded as %+v (%v); want exit 5 on r1, its start and end, its user", late, j, err)
	}
	if !waitFor(30*time.Second, func() bool {
		h, err := cl.History(ctx, url.Values{"id": {strconv.FormatUint(late, 10)}})
		return err == nil && len(h.Jobs) == 1 && h.Jobs[0].ExitCode == 5
	}) {
		t.Fatalf("bhist %d: want the job that exited 5 after the backup", late)
	}
	if b, _ := os.ReadFile(lateOut); strings.Count(string(b), "run") != 1 {
		t.Fatalf("job %d ran twice: output %q", late, b)
	}
	// The array: rebuilt from the nodelet's copies, its running element
	// adopted under it (ID[2], the same process), its ended one recorded
	// with its exit code.
	elem := func(idx int) (api.Job, bool) {
		for id := arr.JobID + 1; id <= arr.JobID+2; id++ {
			if j, _, err := cl.Job(ctx, id, 0, 0); err == nil && j.ArrayID == arr.JobID && j.ArrayIndex == idx {
				return j, true
			}
		}
		return api.Job{}, false
	}
	if !waitFor(30*time.Second, func() bool {
		e2, ok2 := elem(2)
		e1, ok1 := elem(1)
		return ok1 && ok2 && e2.State == api.JobRunning && e1.State == api.JobFailed && e1.ExitCode == 4
	}) {
		e1, _ := elem(1)
		e2, _ := elem(2)
		t.Fatalf("array %d after the restore: element 1 %s exit %d, element 2 %s; want FAILED exit 4 and RUNNING under the array", arr.JobID, e1.State, e1.ExitCode, e2.State)
	}
	if pids(arrMarker) != arrPID {
		t.Fatalf("array %d's element 2: processes %q, was %s; want the same process", arr.JobID, pids(arrMarker), arrPID)
	}
	o, err := runEnv(t, admin, bin+"/bjobs", "-a")
	found := false
	for _, ln := range strings.Split(o, "\n") {
		f := strings.Fields(ln)
		found = found || len(f) > 6 && f[0] == strconv.FormatUint(arr.JobID, 10) && f[2] == "RUN" && f[6] == "arr[2]"
	}
	if err != nil || !found {
		t.Fatalf("bjobs -a after the restore: %v\n%s\nwant array %d's element arr[2] running", err, o, arr.JobID)
	}
	next := submit("true")
	if next <= arr.JobID+2 {
		t.Fatalf("the first job after the restore got id %d; ids up to %d were given (job %d ended, job %d ran on the node, array %d's elements)", next, arr.JobID+2, ended, lost, arr.JobID)
	}
	h, err := cl.History(ctx, url.Values{"id": {strconv.FormatUint(ended, 10)}})
	if err != nil || len(h.Jobs) != 1 || h.Jobs[0].ExitCode != 3 {
		t.Fatalf("bhist %d: %+v, %v; want the job that exited 3", ended, h.Jobs, err)
	}
	if b, _ := os.ReadFile(endedOut); strings.Count(string(b), "run") != 1 {
		t.Fatalf("job %d ran twice: output %q", ended, b)
	}
	for _, id := range []uint64{kept, held, lost, arr.JobID} {
		if _, err := cl.Kill(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if !waitFor(time.Minute, func() bool { return jobState(held) == api.JobCancelled && pids(heldMarker) == "" }) {
		t.Fatalf("job %d, adopted after the restore, bkilled: %s", held, jobState(held))
	}
	if b, _ := os.ReadFile(heldOut); strings.Count(string(b), "run") != 1 {
		t.Fatalf("job %d ran twice: output %q", held, b)
	}
	if !waitFor(time.Minute, func() bool { return jobState(lost) == api.JobCancelled && pids(lostMarker) == "" }) {
		t.Fatalf("job %d, submitted after the backup and adopted, bkilled: %s", lost, jobState(lost))
	}
	if !waitFor(time.Minute, func() bool { return jobState(kept) == api.JobCancelled && pids(keptMarker) == "" }) {
		t.Fatalf("job %d, adopted after the restore, bkilled: %s", kept, jobState(kept))
	}
	if !waitFor(time.Minute, func() bool { return pids(arrMarker) == "" }) {
		t.Fatalf("array %d, rebuilt after the restore, bkilled: its element still runs", arr.JobID)
	}
	if strings.Contains(nlog.String(), "container lost") {
		t.Error("the nodelet reported a container lost")
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
