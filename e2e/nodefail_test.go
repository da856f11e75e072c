package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/jobspec"
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
// comes back UP and its nodelet stops the stale containers.
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
		res, err := c.Submit(ctx, api.SubmitRequest{Spec: spec, User: "root", Cwd: cwd})
		if err != nil {
			t.Fatal(err)
		}
		return res.JobID
	}
	wait := func(id uint64, d time.Duration, ok func(api.Job) bool) api.Job {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			j, _, err := c.Job(ctx, id, 0, 0)
			if err == nil && ok(j) {
				return j
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d: condition not met in %s; last %s %+v (%v)", id, d, j.State, j.Containers, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
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
	for len(pidsOf("rq")) == 0 {
		time.Sleep(50 * time.Millisecond)
	}
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
	deadline := time.Now().Add(20 * time.Second)
	for alive(first) {
		if time.Now().After(deadline) {
			t.Fatalf("the thawed nodelet on %s did not stop the stale container (pid %d)", node, first)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ps := pidsOf("rq"); len(ps) != 2 || !alive(ps[1]) {
		t.Fatalf("requeued job's processes %v: want the stale one gone and one live copy", ps)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		nodes, err := c.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		up := false
		for _, n := range nodes.Nodes {
			up = up || (n.Name == node && n.State == api.NodeUp)
		}
		if up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not UP again after the thaw", node)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := c.Kill(ctx, rq); err != nil {
		t.Fatal(err)
	}
}
