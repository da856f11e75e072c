package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// preemptParts: one partition whose jobs are requeued when preempted,
// with a one-second grace; QOS high preempts low (requeued, the
// partition's mode) and scav (cancelled, its own mode).
const preemptParts = `
partition "batch" {
  nodes        = ["*"]
  preempt_mode = "requeue"
  grace_time   = "1s"
}
qos "high" {
  priority = 100
  preempt  = ["low", "scav", "susp"]
}
qos "low" {
  priority = 10
}
qos "scav" {
  priority     = 1
  preempt_mode = "cancel"
}
qos "susp" {
  priority     = 5
  preempt_mode = "suspend"
}
`

// TestPreemptGang fills a two-node cluster with two one-node sessions of
// nobody's, one of QOS low (requeue) and one of QOS scav (cancel); root
// then submits a two-node gang of QOS high. The gang starts within
// grace_time + 2 s of its submission, on both nodes at once; the low
// session is back in the queue with its id, its first run kept (bhist -l
// names the preemptor), and runs again once the gang is done; the scav
// session ends PREEMPTED.
//
// Then a session of QOS susp (mode suspend) runs on one node and a
// second high gang takes both: the session is frozen (SSUSP, reason
// Preempted) in the entry that chooses it, the gang runs on its CPUs,
// and the session resumes, thawed, once the gang is done.
func TestPreemptGang(t *testing.T) {
	needRunc(t)
	base := searchable(t)
	parts := filepath.Join(base, "partitions.hcl")
	if err := os.WriteFile(parts, []byte(preemptParts), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 2, "1", "--partitions", parts)
	dir := dirOf(t, nobodyUser, 0o777, base, "work")
	session := func(name, qos, command string, size int) string {
		mode := "single-node"
		if size > 1 {
			mode = "multi-node"
		}
		return `job "` + name + `" {
  image   = "host"
  qos     = "` + qos + `"
  command = ["/bin/sh", "-c", "` + command + `"]
  cluster {
    size = ` + strconv.Itoa(size) + `
    mode = "` + mode + `"
  }
  resources {
    cpu    = 1
    memory = "256MiB"
  }
}`
	}
	running := func(j api.Job) bool { return j.State == api.JobRunning }
	low, _ := c.submitAs(nobodyUser.uid, nobodyUser.gid, dir, "low", session("low", "low", "exec sleep 300", 1))
	scav, _ := c.submitAs(nobodyUser.uid, nobodyUser.gid, dir, "scav", session("scav", "scav", "exec sleep 300", 1))
	c.waitState(low, 60*time.Second, running)
	c.waitState(scav, 60*time.Second, running)

	high, _ := c.submit(dir, "high", session("high", "high", "exec sleep 4", 2))
	hj := c.waitState(high, 30*time.Second, running)
	const grace = time.Second
	wait := hj.Started.Sub(hj.Submitted)
	t.Logf("high-QOS gang started %v after its submission (target ≤ grace_time %v + 2s)", wait, grace)
	if wait > grace+2*time.Second {
		t.Errorf("the gang started %v after its submission; want within grace_time + 2s", wait)
	}
	nodes := map[string]bool{}
	for _, ct := range hj.Containers {
		nodes[ct.Node] = true
	}
	if len(nodes) != 2 {
		t.Errorf("the gang runs on %v; want both nodes", nodes)
	}
	slices.Sort(hj.Preempted)
	if !slices.Equal(hj.Preempted, []uint64{low, scav}) {
		t.Errorf("the gang preempted %v; want [%d %d]", hj.Preempted, low, scav)
	}

	lj := c.job(low)
	if lj.ID != low || lj.State != api.JobPending || lj.Requeues != 1 || len(lj.Runs) != 1 || lj.Preempt == nil || lj.Preempt.By != high {
		t.Fatalf("low after the preemption: %s run %d, %d runs kept, preempt %+v; want PENDING, run 1, its first run kept, preempted by %d",
			lj.State, lj.Requeues, len(lj.Runs), lj.Preempt, high)
	}
	r := lj.Runs[0]
	t.Logf("low's first run ended %v before the gang started", hj.Started.Sub(r.Ended))
	if r.Started.IsZero() || r.Containers[0].Node == "" || !strings.Contains(r.Reason, "preempted by job "+strconv.FormatUint(high, 10)) {
		t.Errorf("low's first run kept as %+v; want its start, node and the preemptor", r)
	}
	if r.Ended.After(hj.Started) {
		t.Errorf("low's first run ended %v, after the gang started %v", r.Ended, hj.Started)
	}
	sj := c.job(scav)
	if sj.State != api.JobPreempted || !strings.Contains(sj.Reason, "preempted by job") {
		t.Errorf("scav after the preemption: %s (%s); want PREEMPTED", sj.State, sj.Reason)
	}
	out, errOut, code := c.runAs(nobodyUser.uid, dir, "bhist", "-l", strconv.FormatUint(low, 10))
	if code != 0 || !strings.Contains(out, "preempted by job "+strconv.FormatUint(high, 10)) {
		t.Errorf("bhist -l %d: exit %d: %s%s; want the preemptor named", low, code, out, errOut)
	}

	// The gang ends; low runs again, its second run, under its id.
	c.waitState(high, 30*time.Second, func(j api.Job) bool { return j.State == api.JobCompleted })
	lj = c.waitState(low, 30*time.Second, running)
	if lj.Requeues != 1 {
		t.Errorf("low runs again as run %d; want 1", lj.Requeues)
	}
	if _, _, code := c.run(dir, "bkill", strconv.FormatUint(low, 10)); code != 0 {
		t.Errorf("bkill %d: exit %d", low, code)
	}
	c.waitState(low, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })

	// Mode suspend.
	susp, _ := c.submitAs(nobodyUser.uid, nobodyUser.gid, dir, "susp", session("susp", "susp", "exec sleep 300", 1))
	sj = c.waitState(susp, 60*time.Second, running)
	cid := "troupe-" + sj.Containers[0].KernelID
	freezer := freezerState(cid) != "" // cgroup v1: the test reads the freezer too
	began := time.Now()
	high2, _ := c.submit(dir, "high2", session("high2", "high", "exec sleep 3", 2))
	if !waitFor(10*time.Second, func() bool {
		j := c.job(susp)
		return j.Suspended != nil && (!freezer || freezerState(cid) == "FROZEN")
	}) {
		t.Fatalf("susp not suspended: %+v, freezer %q", c.job(susp).Suspended, freezerState(cid))
	}
	t.Logf("susp frozen %v after the gang's submission (freezer read: %v)", time.Since(began), freezer)
	hj = c.waitState(high2, 30*time.Second, running)
	t.Logf("second gang running %v after its submission", hj.Started.Sub(hj.Submitted))
	sj = c.job(susp)
	if sj.State != api.JobRunning || sj.Suspended == nil || sj.Suspended.Reason != "Preempted" || sj.Preempt == nil || sj.Preempt.By != high2 ||
		sj.Preempt.Mode != "suspend" || !sj.Suspended.Since.Equal(sj.Preempt.At) {
		t.Fatalf("susp beside the gang: %s, suspended %+v, preempt %+v; want suspended for %d in the entry that chose it",
			sj.State, sj.Suspended, sj.Preempt, high2)
	}
	if out, _, code := c.runAs(nobodyUser.uid, dir, "bjobs", strconv.FormatUint(susp, 10)); code != 0 || !strings.Contains(out, "SSUSP") {
		t.Errorf("bjobs %d: exit %d: %s; want SSUSP", susp, code, out)
	}
	c.waitState(high2, 30*time.Second, func(j api.Job) bool { return j.State == api.JobCompleted })
	sj = c.waitState(susp, 30*time.Second, func(j api.Job) bool { return j.Suspended == nil })
	if sj.State != api.JobRunning || sj.Preempt.Resumed.IsZero() || (freezer && freezerState(cid) != "THAWED") {
		t.Errorf("susp after the gang: %s, preempt %+v, freezer %q; want running again, thawed", sj.State, sj.Preempt, freezerState(cid))
	}
	c.run(dir, "bkill", strconv.FormatUint(susp, 10))
}
