package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// TestHealthCheck runs a two-node dev cluster whose nodelets run a site
// health script every second (nodelet.hcl health_check), one verdict
// file per node that the test flips between passing and NHC-style
// failing. A failing script drains its node within one interval with
// the script's first line as the reason (bhosts, sinfo -R), nothing new
// starts there, the requeue job running there starts again on the
// other node (excluded from the failed one) while the plain job goes
// on; a passing script resumes the node, but never lifts an admin's
// drain.
func TestHealthCheck(t *testing.T) {
	const interval = time.Second
	const failure = "ERROR: disk /scratch missing"
	dir, cwd := t.TempDir(), t.TempDir()
	_ = os.Chmod(cwd, 0o777)
	verdicts := t.TempDir()
	// verdict sets node's script: sourced by the health program, which
	// fails with NHC's way of saying so, or passes.
	verdict := func(node string, ok bool) {
		t.Helper()
		body := "exit 0\n"
		if !ok {
			body = fmt.Sprintf("echo %q; exit 1\n", failure)
		}
		tmp := filepath.Join(verdicts, "."+node)
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(verdicts, node)); err != nil {
			t.Fatal(err)
		}
	}
	verdict("node1", true)
	verdict("node2", true)
	prog := filepath.Join(verdicts, "healthcheck")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n. "+verdicts+"/$TROUPE_NODE\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nodelet.hcl")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("health_check {\n  program  = %q\n  interval = %q\n  timeout  = \"10s\"\n}\n", prog, interval)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TROUPE_NODELET_CONFIG", conf)
	_, addr := startScheddArgs(t, t.TempDir(), "--nodes", "2", "--node-cpu", "2", "--node-memory", "1GiB")
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin+"/"+name, args...)
		cmd.Env = append(os.Environ(), "TROUPE_ADDR="+addr)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out.String())
		}
		return out.String()
	}
	submit := func(name string, requeue bool) uint64 {
		t.Helper()
		spec := jobspec.Job{Name: name, Image: "host", Requeue: requeue,
			Command:   []string{"/bin/sh", "-c", "echo $$ >> " + filepath.Join(cwd, name+".pids") + "; exec sleep 300"},
			Cluster:   jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode},
			Resources: jobspec.Resources{CPU: 1, Memory: 64 << 20}}
		res, err := c.Submit(ctx, api.SubmitRequest{Spec: wire.ToAPI(spec), User: "root", Cwd: cwd})
		if err != nil {
			t.Fatal(err)
		}
		return res.JobID
	}
	waitJob := func(id uint64, d time.Duration, ok func(api.Job) bool) api.Job {
		t.Helper()
		var j api.Job
		var err error
		if !eventually.Within(d, func() bool {
			j, _, err = c.Job(ctx, id, 0, 0)
			return err == nil && ok(j)
		}) {
			t.Fatalf("job %d: condition not met in %s; last %s %+v (%v)", id, d, j.State, j.Containers, err)
		}
		return j
	}
	waitNode := func(name string, d time.Duration, ok func(api.Node) bool) api.Node {
		t.Helper()
		var last api.Node
		var err error
		if !eventually.Within(d, func() bool {
			var nodes api.NodeList
			if nodes, err = c.Nodes(ctx); err != nil {
				return false
			}
			for _, n := range nodes.Nodes {
				if n.Name == name {
					last = n
				}
			}
			return last.Name == name && ok(last)
		}) {
			t.Fatalf("node %s: condition not met in %s; last %+v (%v)", name, d, last, err)
		}
		return last
	}
	healthDrained := func(n api.Node) bool {
		return n.Drain && n.DrainedBy == "healthcheck" && n.Reason == failure && n.Health == failure
	}
	inService := func(n api.Node) bool { return n.State == api.NodeUp && !n.Drain && n.Health == "" }
	running := func(j api.Job) bool { return j.State == api.JobRunning }
	waitNode("node1", 30*time.Second, inService)
	waitNode("node2", 30*time.Second, inService)

	// Both jobs go to node1: best fit, ties to the lowest name.
	rq, plain := submit("rq", true), submit("plain", false)
	rj, pj := waitJob(rq, 30*time.Second, running), waitJob(plain, 30*time.Second, running)
	if rj.Containers[0].Node != "node1" || pj.Containers[0].Node != "node1" {
		t.Fatalf("jobs on %s and %s, want both on node1", rj.Containers[0].Node, pj.Containers[0].Node)
	}

	// node1's script fails: drained within an interval, by the check.
	flipped := time.Now()
	verdict("node1", false)
	n := waitNode("node1", interval+5*time.Second, healthDrained)
	toDrained := time.Since(flipped)
	t.Logf("failing script to node drained: %s (interval %s)", toDrained.Round(time.Millisecond), interval)
	if n.State != api.NodeDraining {
		t.Errorf("node1 with a job still running is %s, want DRAINING", n.State)
	}
	if toDrained > interval+2*time.Second {
		t.Errorf("node1 drained %s after its script failed: more than one interval (%s) and a heartbeat's round trip", toDrained, interval)
	}
	// The requeue job starts again on node2, excluded from node1; the
	// plain one runs on.
	rj = waitJob(rq, 30*time.Second, func(j api.Job) bool { return j.Requeues == 1 && j.State == api.JobRunning })
	if rj.Containers[0].Node != "node2" || !slices.Equal(rj.ExcludeNodes, []string{"node1"}) || !strings.Contains(rj.LastRequeue, failure) {
		t.Fatalf("requeued job on %s, excluded %v, why %q; want node2, [node1], the check's reason", rj.Containers[0].Node, rj.ExcludeNodes, rj.LastRequeue)
	}
	t.Logf("requeue job running on node2 %s after the script failed", time.Since(flipped).Round(time.Millisecond))
	// Its first run's process on node1 is stopped by node1's nodelet.
	pids := func() []int {
		b, _ := os.ReadFile(filepath.Join(cwd, "rq.pids"))
		var out []int
		for _, f := range strings.Fields(string(b)) {
			p, _ := strconv.Atoi(f)
			out = append(out, p)
		}
		return out
	}
	eventually.True(t, 20*time.Second, "the requeue job's first run stopped on node1 and one live copy", func() bool {
		ps := pids()
		return len(ps) == 2 && !alive(ps[0]) && alive(ps[1])
	})
	if j := waitJob(plain, time.Second, func(api.Job) bool { return true }); j.State != api.JobRunning || j.Containers[0].Node != "node1" {
		t.Fatalf("plain job on the failing node: %s on %s, want RUNNING on node1", j.State, j.Containers[0].Node)
	}
	// A job submitted now would take node1 (its best fit, the lowest
	// name at equal free room): it starts on node2.
	probe := submit("probe", false)
	if j := waitJob(probe, 30*time.Second, running); j.Containers[0].Node != "node2" {
		t.Fatalf("a job submitted while node1 failed its check runs on %s", j.Containers[0].Node)
	}
	if out := run("bhosts"); !strings.Contains(out, failure) {
		t.Errorf("bhosts does not show the check's reason:\n%s", out)
	}
	if out := run("troupe-slurm", "sinfo", "-R"); !strings.Contains(out, failure[:20]) || !strings.Contains(out, "node1") || strings.Contains(out, "node2") {
		t.Errorf("sinfo -R:\n%s\nwant node1 with %q", out, failure[:20])
	}
	if out := run("troupe-slurm", "sinfo", "-R", "-h", "-o", "%40E|%u|%N"); !strings.HasPrefix(out, failure) || !strings.Contains(out, "|healthcheck|node1") {
		t.Errorf("sinfo -R -o: %q", out)
	}

	// It passes again: node1 is back, and takes the next job.
	flipped = time.Now()
	verdict("node1", true)
	waitNode("node1", interval+5*time.Second, inService)
	toResumed := time.Since(flipped)
	t.Logf("passing script to node resumed: %s", toResumed.Round(time.Millisecond))
	if toResumed > interval+2*time.Second {
		t.Errorf("node1 resumed %s after its script passed: more than one interval (%s) and a heartbeat's round trip", toResumed, interval)
	}
	if j := waitJob(submit("after", false), 30*time.Second, running); j.Containers[0].Node != "node1" {
		t.Fatalf("a job submitted after node1 passed runs on %s; node2 is full", j.Containers[0].Node)
	}

	// An admin drains node1 while its check fails: a passing check
	// lifts the check's drain, never the admin's.
	verdict("node1", false)
	waitNode("node1", interval+5*time.Second, healthDrained)
	if _, err := c.Drain(ctx, api.NodeDrain{Nodes: []string{"node1"}, Reason: "DIMM swap"}); err != nil {
		t.Fatal(err)
	}
	verdict("node1", true)
	n = waitNode("node1", interval+5*time.Second, func(n api.Node) bool { return n.Health == "" })
	if !n.Drain || n.Reason != "DIMM swap" || n.DrainedBy == "healthcheck" {
		t.Fatalf("after the check passed, node1: drain %v by %q (%q); want the admin's drain kept", n.Drain, n.DrainedBy, n.Reason)
	}
	if _, err := c.Drain(ctx, api.NodeDrain{Nodes: []string{"node1"}, Resume: true}); err != nil {
		t.Fatal(err)
	}
	waitNode("node1", 5*time.Second, inService)
}
