package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestSignalsUsageHistory runs real runc containers: bkill -s delivers
// USR1 to a running job once (it traps it and goes on) and TERM ends it
// with the code its trap exits with; a job not running refuses USR1 and
// is cancelled by INT; a job that burns CPU and memory ends with its
// usage in bjob and bhist; bsub -e puts stderr in a file of its own.
func TestSignalsUsageHistory(t *testing.T) {
	needRunc(t)
	c := startCluster(t, 1, "2")
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	peek := func(id uint64) string {
		out, _, _ := c.run(dir, "bpeek", strconv.FormatUint(id, 10))
		return out
	}
	waitPeek := func(id uint64, want string) string {
		t.Helper()
		var out string
		if !waitFor(60*time.Second, func() bool { out = peek(id); return strings.Contains(out, want) }) {
			t.Fatalf("job %d: output %q never held %q", id, out, want)
		}
		return out
	}

	sig, _ := c.submit(dir, "sig", `
job "sig" {
  resources {
    cpu    = 0.5
    memory = "128MiB"
  }
  image   = "host"
  command = ["sh", "-c", "trap 'echo got USR1' USR1; trap 'echo got TERM; exit 42' TERM; echo ready; while :; do sleep 0.2; done"]
  output  = "sig-%j.out"
}`)
	c.waitState(sig, 60*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
	waitPeek(sig, "ready")
	id := strconv.FormatUint(sig, 10)
	if out, errs, code := c.run(dir, "bkill", "-s", "USR1", id); code != 0 || out != "Job <"+id+"> is being signalled (SIGUSR1).\n" {
		t.Fatalf("bkill -s USR1: exit %d, %q %q", code, out, errs)
	}
	waitPeek(sig, "got USR1")
	if out, errs, code := c.run(dir, "bkill", "-s", "NOPE", id); code != 1 || errs != "bkill: -s: signal \"NOPE\": unknown; use a name such as USR1, HUP, INT, TERM, KILL, STOP, CONT, or a number\n" {
		t.Errorf("bkill -s NOPE: exit %d, %q %q", code, out, errs)
	}

	// A held job: USR1 refused, INT cancels it. The state changes make
	// the nodelet reconcile again: USR1 must not be sent twice.
	held, _ := c.submit(dir, "held", `
job "held" {
  image   = "host"
  command = ["true"]
}`, "-H")
	hid := strconv.FormatUint(held, 10)
	if _, errs, code := c.run(dir, "bkill", "-s", "USR1", hid); code != 1 ||
		errs != "bkill: job "+hid+" is HELD: only a running job's containers can get SIGUSR1; KILL, TERM or INT cancels it\n" {
		t.Errorf("USR1 to a held job: exit %d, %q", code, errs)
	}
	if _, errs, code := c.run(dir, "bkill", "-s", "INT", hid); code != 0 {
		t.Errorf("INT to a held job: exit %d, %q", code, errs)
	}
	if j := c.job(held); j.State != api.JobCancelled {
		t.Errorf("held job after INT: %s", j.State)
	}

	// A job that burns about 2 s of CPU and holds 64 MiB, with stderr
	// apart.
	burn, _ := c.submit(dir, "burn", `
job "burn" {
  resources {
    cpu    = 1
    memory = "512MiB"
  }
  image   = "host"
  command = ["sh", "-c", "x=$(head -c 67108864 /dev/zero | tr '\\0' a); echo $${#x}; echo oops >&2; end=$(($(date +%s) + 3)); while [ $(date +%s) -lt $end ]; do :; done"]
  output  = "burn-%j.out"
}`, "-e", "burn-%J.%h.err")
	bj := c.waitState(burn, 90*time.Second, func(j api.Job) bool { return j.State.Terminal() })
	if bj.State != api.JobCompleted {
		t.Fatalf("burn ended %s (%s), exit %d", bj.State, bj.Reason, bj.ExitCode)
	}
	if bj.CPUTime < 500*time.Millisecond || bj.MemPeak < 64<<20 || bj.Containers[0].CPUTime != bj.CPUTime {
		t.Errorf("burn usage: cpu %v, peak %d bytes, container %v", bj.CPUTime, bj.MemPeak, bj.Containers[0].CPUTime)
	}
	t.Logf("burn used %v CPU, peak memory %d MiB", bj.CPUTime, bj.MemPeak>>20)
	if out, _ := os.ReadFile(filepath.Join(dir, "burn-"+strconv.FormatUint(burn, 10)+".out")); string(out) != "67108864\n" {
		t.Errorf("burn stdout %q, want the length alone", out)
	}
	if errb, _ := os.ReadFile(filepath.Join(dir, "burn-"+strconv.FormatUint(burn, 10)+".main1.err")); string(errb) != "oops\n" {
		t.Errorf("burn stderr file %q, want oops", errb)
	}
	if out, _, _ := c.run(dir, "bjob", strconv.FormatUint(burn, 10)); !strings.Contains(out, "CPU time:  ") || strings.Contains(out, "CPU time:  -") {
		t.Errorf("bjob shows no usage:\n%s", out)
	}

	// TERM ends the signalled job as its trap says, and USR1 came once.
	if out, errs, code := c.run(dir, "bkill", "-s", "TERM", "--host", "main1", id); code != 0 {
		t.Fatalf("bkill -s TERM: exit %d, %q %q", code, out, errs)
	}
	sj := c.waitState(sig, 60*time.Second, func(j api.Job) bool { return j.State.Terminal() })
	out := peek(sig)
	if sj.State != api.JobFailed || sj.ExitCode != 42 || strings.Count(out, "got USR1") != 1 || !strings.Contains(out, "got TERM") {
		t.Errorf("signalled job ended %s exit %d (%s), output %q", sj.State, sj.ExitCode, sj.Reason, out)
	}

	// bhist: my jobs, with usage; -l has the timeline.
	hout, errs, code := c.run(dir, "bhist", "-o", "json")
	var hist []api.HistoryJob
	if code != 0 || json.Unmarshal([]byte(hout), &hist) != nil || len(hist) != 3 {
		t.Fatalf("bhist -o json: exit %d, %s%s", code, hout, errs)
	}
	for _, h := range hist {
		if h.ID == burn && (h.CPUTime < 500*time.Millisecond || h.MemPeak < 64<<20 || h.State != api.JobCompleted ||
			len(h.Nodes) != 1 || h.Run <= 0 || h.Started.IsZero()) {
			t.Errorf("bhist burn: %+v", h)
		}
	}
	long, _, _ := c.run(dir, "bhist", "-l", id)
	for _, want := range []string{"signalled  SIGUSR1 to all containers", "signalled  SIGTERM to main1", "ended      FAILED, exit code 42", "Exit code: 42"} {
		if !strings.Contains(long, want) {
			t.Errorf("bhist -l %s lacks %q:\n%s", id, want, long)
		}
	}
	table, _, _ := c.run(dir, "bhist")
	t.Logf("bhist:\n%s", table)
}
