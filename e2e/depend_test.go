package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

func shJob(name, script string) string {
	return fmt.Sprintf(`
job %q {
  image   = "host"
  command = ["sh", "-c", %q]
  resources {
    cpu    = 1
    memory = "64MiB"
  }
}`, name, script)
}

// bsub -w with real jobs: B after A starts only once A has ended; a
// dependency that can never be satisfied keeps its job PENDING until
// bkill; an unknown job id is refused.
func TestDependencies(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 1, "4")
	dir := t.TempDir()

	a, _ := c.submit(dir, "a", shJob("a", "sleep 2"))
	b, _ := c.submit(dir, "b", shJob("b", "true"), "-w", fmt.Sprintf("done(%d)", a))
	c.waitState(a, time.Minute, func(j api.Job) bool { return j.State == api.JobRunning })
	if j := c.job(b); j.State != api.JobPending || j.Reason != api.ReasonDependency {
		t.Fatalf("job %d while job %d runs: %s (%s)", b, a, j.State, j.Reason)
	}
	out, _, _ := c.run(dir, "bqueue")
	if !strings.Contains(out, "Dependency") {
		t.Errorf("bqueue does not show the reason:\n%s", out)
	}
	jb := c.waitState(b, time.Minute, func(j api.Job) bool { return j.State.Terminal() })
	ja := c.job(a)
	if ja.State != api.JobCompleted || jb.State != api.JobCompleted {
		t.Fatalf("a %s, b %s", ja.State, jb.State)
	}
	if jb.Started.Before(ja.Ended) {
		t.Fatalf("job %d started at %s, before job %d ended at %s", b, jb.Started, a, ja.Ended)
	}

	// A job that fails: afterok never comes, afternotok runs.
	f, _ := c.submit(dir, "f", shJob("f", "exit 3"))
	never, _ := c.submit(dir, "never", shJob("never", "true"), "-w", fmt.Sprintf("afterok:%d", f))
	notok, _ := c.submit(dir, "notok", shJob("notok", "true"), "--dependency", fmt.Sprintf("afternotok:%d", f))
	c.waitState(notok, time.Minute, func(j api.Job) bool { return j.State == api.JobCompleted })
	j := c.waitState(never, time.Minute, func(j api.Job) bool { return j.Reason == api.ReasonDependencyNeverSatisfied })
	if j.State != api.JobPending {
		t.Fatalf("job %d: %s", never, j.State)
	}
	out, _, _ = c.run(dir, "bjob", strconv.FormatUint(never, 10))
	for _, want := range []string{fmt.Sprintf("Dependency:     done(%d)", f), fmt.Sprintf("never satisfied (job %d FAILED)", f)} {
		if !strings.Contains(out, want) {
			t.Errorf("bjob lacks %q:\n%s", want, out)
		}
	}
	if _, errOut, code := c.run(dir, "bkill", strconv.FormatUint(never, 10)); code != 0 {
		t.Fatalf("bkill %d: exit %d: %s", never, code, errOut)
	}
	if j := c.job(never); j.State != api.JobCancelled {
		t.Fatalf("killed job %d is %s", never, j.State)
	}

	_, errOut, code := c.run(dir, "bsub", "-w", "done(999)", dir+"/a.hcl")
	if code != 1 || !strings.Contains(errOut, "job 999 does not exist") {
		t.Errorf("bsub -w done(999): exit %d, %q", code, errOut)
	}
	_, errOut, code = c.run(dir, "bsub", "-w", "done(1) || exit(2) && ended(3)", dir+"/a.hcl")
	if code != 2 || !strings.Contains(errOut, "mixes && and ||") {
		t.Errorf("bsub -w with && and ||: exit %d, %q", code, errOut)
	}
}
