package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// startScheddArgs starts `schedd --dev` on dir with args added and
// returns it with its address; the test stops it.
func startScheddArgs(t *testing.T, dir string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin+"/schedd", append([]string{"--dev", "--data-dir", dir, "--runtime", "process", "--stop-grace", "1s"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	addr := scanAddr(out)
	select {
	case a := <-addr:
		return cmd, a
	case <-time.After(60 * time.Second):
		t.Fatal("schedd did not start in 60s")
	}
	return nil, ""
}

// nodeletPID finds the pid of the dev nodelet called name among schedd's
// children.
func nodeletPID(t *testing.T, schedd int, name string) int {
	t.Helper()
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(schedd) + "/task/*/children")
	var kids []string
	for _, p := range tasks { // a Go process forks from any thread
		b, _ := os.ReadFile(p)
		kids = append(kids, strings.Fields(string(b))...)
	}
	for _, f := range kids {
		cl, _ := os.ReadFile("/proc/" + f + "/cmdline")
		if strings.Contains(string(cl), "\x00--name\x00"+name+"\x00") {
			pid, _ := strconv.Atoi(f)
			return pid
		}
	}
	t.Fatalf("no nodelet %s under schedd %d", name, schedd)
	return 0
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// TestNodeFailureRealNodelet freezes a real nodelet (SIGSTOP) past the
// node timeout: its node goes DOWN, the requeue job it ran starts on the
// other node, the plain one ends NODE_FAIL; thawed (SIGCONT), the node
// comes back UP. The stale containers are gone by then: the node's fence
// killed them when its lease ran out (TestFenceNoOverlap).
func TestNodeFailureRealNodelet(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes a nodelet past the node timeout")
	}
	dir, cwd := t.TempDir(), t.TempDir()
	_ = os.Chmod(cwd, 0o777)
	cmd, addr := startScheddArgs(t, dir, "--nodes", "2", "--node-cpu", "2", "--node-memory", "1GiB", "--node-timeout", "14s")
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	job := func(name string, requeue bool) uint64 {
		pids := filepath.Join(cwd, name+".pids")
		spec := jobspec.Job{Name: name, Image: "host", Requeue: requeue,
			Command:   []string{"/bin/sh", "-c", "echo $$ >> " + pids + "; exec sleep 300"},
			Cluster:   jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
			Resources: jobspec.Resources{CPU: 1, Memory: 64 << 20}}
		res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec), User: "root", Cwd: cwd})
		if err != nil {
			t.Fatal(err)
		}
		return res.JobID
	}
	wait := func(id uint64, d time.Duration, ok func(api.Job) bool) api.Job {
		t.Helper()
		var j api.Job
		eventually.NoError(t, d, fmt.Sprintf("job %d's condition", id), func() error {
			var err error
			j, _, err = c.Job(ctx, id, 0, 0)
			if err == nil && ok(j) {
				return nil
			}
			return fmt.Errorf("%s %+v (%v)", j.State, j.Containers, err)
		})
		return j
	}
	pidsOf := func(name string) []int {
		b, _ := os.ReadFile(filepath.Join(cwd, name+".pids"))
		var out []int
		for _, f := range strings.Fields(string(b)) {
			p, _ := strconv.Atoi(f)
			out = append(out, p)
		}
		return out
	}
	rq, plain := job("rq", true), job("plain", false)
	running := func(j api.Job) bool { return j.State == api.JobRunning }
	rj, pj := wait(rq, 30*time.Second, running), wait(plain, 30*time.Second, running)
	node := rj.Containers[0].Node
	eventually.True(t, 30*time.Second, "the requeueable job noting its pid", func() bool { return len(pidsOf("rq")) > 0 })
	first := pidsOf("rq")[0]

	nl := nodeletPID(t, cmd.Process.Pid, node)
	if err := syscall.Kill(nl, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	thawed := false
	defer func() {
		if !thawed {
			_ = syscall.Kill(nl, syscall.SIGCONT)
		}
	}()
	rj = wait(rq, 45*time.Second, func(j api.Job) bool { return j.Requeues > 0 && j.State == api.JobRunning })
	if rj.Containers[0].Node == node {
		t.Fatalf("requeued job runs again on the frozen node %s", node)
	}
	t.Logf("requeued job running on %s %s after the freeze", rj.Containers[0].Node, time.Since(stopped).Round(time.Millisecond))
	if pj.Containers[0].Node == node {
		if j := wait(plain, 5*time.Second, func(j api.Job) bool { return j.State.Terminal() }); j.State != api.JobNodeFail {
			t.Fatalf("plain job on the failed node ended %s, want NODE_FAIL", j.State)
		}
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Nodes {
		if n.Name == node && n.State != api.NodeDown {
			t.Fatalf("frozen node %s is %s, want DOWN", node, n.State)
		}
	}

	if err := syscall.Kill(nl, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed = true
	eventually.True(t, 20*time.Second, fmt.Sprintf("the thawed nodelet on %s stopping the stale container (pid %d)", node, first),
		func() bool { return !alive(first) })
	if ps := pidsOf("rq"); len(ps) != 2 || !alive(ps[1]) {
		t.Fatalf("requeued job's processes %v: want the stale one gone and one live copy", ps)
	}
	eventually.True(t, 20*time.Second, fmt.Sprintf("node %s UP again after the thaw", node), func() bool {
		nodes, err := c.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Nodes {
			if n.Name == node && n.State == api.NodeUp {
				return true
			}
		}
		return false
	})
	if _, err := c.Kill(ctx, rq); err != nil {
		t.Fatal(err)
	}
}

// TestDevShortNodeTimeoutKeepsNodesUp: `schedd --dev --node-timeout 2s`
// keeps its healthy idle nodes UP: nodelets heartbeat as often as the
// timeout schedd announces asks (issue 12 item 9; they used to heartbeat
// every 10s whatever the timeout, and went DOWN).
func TestDevShortNodeTimeoutKeepsNodesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("watches idle nodes for 8s")
	}
	_, addr := startScheddArgs(t, t.TempDir(), "--nodes", "2", "--node-cpu", "1", "--node-memory", "1GiB", "--node-timeout", "2s")
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(8 * time.Second)
	for time.Now().Before(end) {
		nodes, err := c.Nodes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Nodes) != 2 {
			t.Fatalf("%d nodes, want 2", len(nodes.Nodes))
		}
		for _, n := range nodes.Nodes {
			if n.State != api.NodeUp {
				t.Fatalf("idle node %s is %s (%s) with --node-timeout 2s", n.Name, n.State, n.Reason)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestFenceNoOverlap: a requeue job's runc container on a nodelet frozen
// (SIGSTOP) past the node timeout is dead before the job's second copy
// starts on the other node (issue 12 item 4): the node's fence killed it
// when its lease ran out. Each copy appends "<copy id> <unix ns>" to the
// job's output every 50ms; every line of the first copy must come before
// every line of the second. Thawed, the nodelet tears the first copy
// down; the second goes on until bkill and the job ends CANCELLED.
func TestFenceNoOverlap(t *testing.T) {
	needRunc(t)
	if testing.Short() {
		t.Skip("freezes a nodelet past the node timeout")
	}
	const timeout = 6 * time.Second
	// --keep-ended: the ended job soon lives in the accounting store only.
	c := startCluster(t, 2, "1", "--node-timeout", timeout.String(), "--keep-ended", "5s")
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o777)
	id, _ := c.submit(dir, "twice", `
job "twice" {
  image   = "host"
  requeue = true
  output  = "twice-%j.out"
  resources {
    cpu = 1
  }
  command = ["/bin/sh", "-c", "id=$(cat /proc/sys/kernel/random/uuid); while :; do echo \"$id $(date +%s%N)\"; sleep 0.05; done"]
}`)
	out := filepath.Join(dir, "twice-"+strconv.FormatUint(id, 10)+".out")
	j := c.waitState(id, 60*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
	node := j.Containers[0].Node
	eventually.True(t, 30*time.Second, "the job writing its first line", func() bool { copies, _ := readCopies(t, out); return len(copies) > 0 })
	nl := nodeletPID(t, c.cmd.Process.Pid, node)
	if err := syscall.Kill(nl, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	thawed := false
	defer func() {
		if !thawed {
			_ = syscall.Kill(nl, syscall.SIGCONT)
		}
	}()
	j = c.waitState(id, 60*time.Second, func(j api.Job) bool { return j.Requeues > 0 && j.State == api.JobRunning })
	if j.Containers[0].Node == node {
		t.Fatalf("requeued job runs again on the frozen node %s", node)
	}
	// Let the second copy write for a while, with the first (if alive)
	// still able to write beside it.
	var copies map[string][2]int64
	var order []string
	eventually.NoError(t, 20*time.Second, "the second copy writing for 2s", func() error {
		copies, order = readCopies(t, out)
		if len(order) >= 2 && copies[order[1]][1]-copies[order[1]][0] > int64(2*time.Second) {
			return nil
		}
		return fmt.Errorf("%d copies", len(order))
	})
	if len(order) != 2 {
		t.Fatalf("%d copies wrote to %s, want 2", len(order), out)
	}
	first, second := copies[order[0]], copies[order[1]]
	if first[1] >= second[0] {
		t.Fatalf("the two copies overlapped: the first wrote until %s after the second started", time.Duration(first[1]-second[0]))
	}
	freeze := frozen.UnixNano()
	t.Logf("first copy's last line %s after the freeze (node timeout %s); second copy's first line %s after the freeze: %s between the copies",
		time.Duration(first[1]-freeze).Round(time.Millisecond), timeout,
		time.Duration(second[0]-freeze).Round(time.Millisecond), time.Duration(second[0]-first[1]).Round(time.Millisecond))
	if err := syscall.Kill(nl, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed = true
	// The thawed nodelet tears the first copy's container down (its
	// record goes last); the second copy, on the other node, lives on
	// and ends only when killed. Its container is not the first one's:
	// on this machine both nodes share the cgroup tree, and a teardown
	// of the same container id killed the second copy (exit 137).
	records := filepath.Join(c.dir, "nodes", node, "run", "records")
	eventually.True(t, 30*time.Second, fmt.Sprintf("the thawed nodelet on %s tearing the first copy down", node), func() bool {
		ents, err := os.ReadDir(records)
		return err == nil && len(ents) == 0
	})
	torn := time.Now().UnixNano()
	if !eventually.Within(20*time.Second, func() bool {
		copies, order = readCopies(t, out)
		return copies[order[1]][1] > torn
	}) {
		t.Fatalf("the second copy wrote nothing in the 20s after the first one's teardown: %+v", c.job(id))
	}
	if j := c.job(id); j.State != api.JobRunning || j.Requeues != 1 {
		t.Fatalf("after the first copy's teardown the job is %s (run %d, %s), want RUNNING in run 1", j.State, j.Requeues, j.Reason)
	}
	if _, errOut, code := c.run(dir, "bkill", strconv.FormatUint(id, 10)); code != 0 {
		t.Fatalf("bkill exited %d: %s", code, errOut)
	}
	if j := c.waitState(id, 60*time.Second, func(j api.Job) bool { return j.State.Terminal() }); j.State != api.JobCancelled {
		t.Errorf("killed job ended %s (%s, exit %d), want CANCELLED", j.State, j.Reason, j.ExitCode)
	}
	checkRunsInHistory(t, c, dir, id, node, frozen)
}

// checkRunsInHistory: the fenced and requeued job id has both its runs
// in history, each with its own node and times: the first on the frozen
// node, ended by the requeue (REQUEUED), the second elsewhere, ended by
// bkill; in raft and, once the job has left it, in the accounting store
// (bhist, bhist -l, bacct, sacct, sacct -D).
func checkRunsInHistory(t *testing.T, c *devCluster, dir string, id uint64, node string, frozen time.Time) {
	t.Helper()
	ref := strconv.FormatUint(id, 10)
	check := func(where string) {
		t.Helper()
		out, errs, code := c.run(dir, "bhist", "-o", "json", ref)
		var runs []api.HistoryJob
		if code != 0 || json.Unmarshal([]byte(out), &runs) != nil {
			t.Fatalf("%s: bhist -o json %s: exit %d, %s%s", where, ref, code, out, errs)
		}
		if len(runs) != 2 {
			t.Fatalf("%s: bhist %s has %d records, want its 2 runs: %s", where, ref, len(runs), out)
		}
		r0, r1 := runs[0], runs[1]
		if r0.Requeues != 0 || r0.State != api.JobRequeued || !slices.Equal(r0.Nodes, []string{node}) || r0.Started.IsZero() ||
			r0.Ended.Before(frozen) || r0.Run <= 0 || !strings.Contains(r0.Reason, "node "+node+" failed") {
			t.Errorf("%s: run 1: %+v; want REQUEUED on %s, ended after the freeze", where, r0, node)
		}
		if r1.Requeues != 1 || r1.State != api.JobCancelled || len(r1.Nodes) != 1 || r1.Nodes[0] == node ||
			r1.Started.Before(r0.Ended) || r1.Run <= 0 {
			t.Errorf("%s: run 2: %+v; want CANCELLED on the other node, started after run 1 ended", where, r1)
		}
		long, _, _ := c.run(dir, "bhist", "-l", ref)
		flat := strings.Join(strings.Fields(long), " ") // columns aligned apart
		for _, want := range []string{"Job " + ref + ", run 1:", "Job " + ref + ", run 2:", "Nodes: " + node, "Nodes: " + r1.Nodes[0],
			"State: REQUEUED (requeued: node " + node + " failed)", "requeued requeued: node " + node + " failed", "ended CANCELLED"} {
			if !strings.Contains(flat, want) {
				t.Errorf("%s: bhist -l %s lacks %q:\n%s", where, ref, want, long)
			}
		}
		acct, _, code := c.run(dir, "troupe-slurm", "sacct", "-P", "-n", "--format=JobIdRaw,State,NodeList", "-j", ref)
		if want := ref + "|CANCELLED|" + r1.Nodes[0] + "\n"; code != 0 || acct != want {
			t.Errorf("%s: sacct -j %s: %q, want %q (the last run)", where, ref, acct, want)
		}
		acct, _, _ = c.run(dir, "troupe-slurm", "sacct", "-D", "-P", "-n", "--format=JobIdRaw,State,NodeList", "-j", ref)
		if want := ref + "|REQUEUED|" + node + "\n" + ref + "|CANCELLED|" + r1.Nodes[0] + "\n"; acct != want {
			t.Errorf("%s: sacct -D -j %s: %q, want %q (every run)", where, ref, acct, want)
		}
	}
	check("in raft")
	// The job leaves raft KeepEnded after its end: the store holds both
	// runs, each under its own key.
	cl, err := client.New(c.addr)
	if err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 30*time.Second, fmt.Sprintf("job %d leaving raft after its end (--keep-ended 5s)", id), func() bool {
		_, _, err := cl.Job(context.Background(), id, 0, 0)
		return err != nil
	})
	check("in the accounting store")
	sum, err := cl.Accounting(context.Background(), url.Values{"user": {"root"}})
	if err != nil || sum.Total.Jobs != 1 || sum.Total.Run < 2*time.Second {
		t.Errorf("bacct: %+v, %v; want 1 job, both runs' time", sum.Total, err)
	}
}

// readCopies reads the lines "<copy id> <unix ns>" of path: per copy its
// first and last time, and the copies in order of their first line.
func readCopies(t *testing.T, path string) (map[string][2]int64, []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	copies := map[string][2]int64{}
	var order []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue // a line being written
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		span, ok := copies[f[0]]
		if !ok {
			order = append(order, f[0])
			span = [2]int64{ns, ns}
		}
		span[0], span[1] = min(span[0], ns), max(span[1], ns)
		copies[f[0]] = span
	}
	return copies, order
}
