package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// holder is a container's program for TestSuspendAndWarn: it fills 32
// MiB with a pattern, then spins, writing "COUNT CRC" of the pattern to
// DIR/HOST.count (by rename, so a reader never sees half a line) every
// 20000 turns. A process that ran on, froze and thawed with its memory
// intact writes a count that went on from where it stopped and the same
// CRC.
const holder = `import os, sys, zlib
d, host = sys.argv[1], sys.argv[2]
buf = bytearray(os.urandom(4096) * 8192)
crc = zlib.crc32(buf)
n = 0
while True:
    n += 1
    if n % 20000 == 0:
        c = zlib.crc32(buf)
        with open(f"{d}/{host}.tmp", "w") as f:
            f.write(f"{n} {c} {crc}\n")
        os.rename(f"{d}/{host}.tmp", f"{d}/{host}.count")
`

// count reads a holder's last line: its count, the CRC of its pattern
// now, and the CRC it started with.
func count(t *testing.T, dir, host string) (n int, crc, first string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, host+".count"))
	if err != nil {
		return 0, "", ""
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0, "", ""
	}
	n, _ = strconv.Atoi(f[0])
	return n, f[1], f[2]
}

// frozen reads the cgroup v1 freezer state of container id ("" when
// there is none: cgroup v2, or gone).
func freezerState(id string) string {
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/freezer/troupe", id, "freezer.state"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// TestSuspendAndWarn runs real runc containers as nobody on two nodes.
//
// Gang suspend: a session of two containers, one on each node, spins
// writing a counter and holds a memory pattern. scontrol suspend
// freezes both through the cgroup freezer (freezer.state FROZEN within
// 1 s, counters still), bjobs shows SSUSP, squeue S, bqueue SUSPENDED.
// Its CPUs are lent: a job needing a whole node starts meanwhile. badmin
// jresume waits for that job's end, then thaws the session: the
// counters go on from where they stopped, the pattern intact.
//
// Warning signal: a job of walltime 6 s asking for USR1 3 s before its
// end gets it in main1, which writes a file about 3 s after it started,
// before the job ends TIMEOUT.
func TestSuspendAndWarn(t *testing.T) {
	needRunc(t)
	if _, err := os.Stat("/sys/fs/cgroup/freezer/troupe"); err != nil && !cgroupV1Freezer() {
		t.Skip("SKIP: needs the cgroup v1 freezer (/sys/fs/cgroup/freezer), which this test reads")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("SKIP: needs /usr/bin/python3 on the host tree (the holders' program)")
	}
	c := startCluster(t, 2, "2")
	u := nobodyUser
	dir := dirOf(t, u, 0o755, searchable(t), "work")
	if err := os.WriteFile(filepath.Join(dir, "holder.py"), []byte(holder), 0o644); err != nil {
		t.Fatal(err)
	}
	jobFile := func(name, body string) string {
		p := filepath.Join(dir, name+".hcl")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("gang suspend", func(t *testing.T) {
		gang := c.bsubAs(t, u, dir, "", nil, jobFile("gang", fmt.Sprintf(`
job "gang" {
  cluster {
    size = 2
    mode = "multi-node"
  }
  resources {
    cpu    = 2
    memory = "256MiB"
  }
  image   = "host"
  command = ["/usr/bin/python3", "%[1]s/holder.py", "%[1]s", "main1"]
  role "sub" {
    command = ["/usr/bin/python3", "%[1]s/holder.py", "%[1]s", "sub1"]
  }
  mount "work" {
    source = "%[1]s"
    target = "%[1]s"
  }
  output = "%[1]s/gang.out"
}`, dir)))
		id := strconv.FormatUint(gang, 10)
		j := c.waitState(gang, 60*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
		var ids []string
		for _, ct := range j.Containers {
			ids = append(ids, "troupe-"+ct.KernelID)
		}
		if j.Containers[0].Node == j.Containers[1].Node {
			t.Fatalf("both containers on %s: the session should span the two nodes", j.Containers[0].Node)
		}
		hosts := []string{"main1", "sub1"}
		before := map[string]int{}
		crcs := map[string]string{}
		var every time.Duration // the slowest holder's time between two lines
		for _, h := range hosts {
			if !waitFor(60*time.Second, func() bool { n, _, _ := count(t, dir, h); return n > 0 }) {
				out, _ := os.ReadFile(filepath.Join(dir, "gang.out"))
				t.Fatalf("%s never counted: %s", h, out)
			}
			first, _, _ := count(t, dir, h)
			if !waitFor(30*time.Second, func() bool { n, _, _ := count(t, dir, h); return n > first }) {
				t.Fatalf("%s does not count on", h)
			}
			// How often it writes: the time to its next line.
			var n0 int
			n0, crcs[h], _ = count(t, dir, h)
			from := time.Now()
			if !waitFor(30*time.Second, func() bool { n, _, _ := count(t, dir, h); return n > n0 }) {
				t.Fatalf("%s does not count on", h)
			}
			every = max(every, time.Since(from))
		}

		began := time.Now()
		if out, errs, code := c.run(dir, "troupe-slurm", "scontrol", "suspend", id); code != 0 {
			t.Fatalf("scontrol suspend: exit %d, %q %q", code, out, errs)
		}
		if !waitFor(5*time.Second, func() bool {
			return freezerState(ids[0]) == "FROZEN" && freezerState(ids[1]) == "FROZEN"
		}) {
			t.Fatalf("not frozen: %s %q, %s %q", ids[0], freezerState(ids[0]), ids[1], freezerState(ids[1]))
		}
		took := time.Since(began)
		t.Logf("time to frozen (both containers, from scontrol suspend): %v", took)
		if took > time.Second {
			t.Errorf("frozen after %v; want within 1 s", took)
		}
		frozenAt := time.Now()
		for _, h := range hosts {
			before[h], _, _ = count(t, dir, h)
		}
		if out, _, _ := c.run(dir, "bjobs", "-noheader", "-o", "stat", id); strings.TrimSpace(out) != "SSUSP" {
			t.Errorf("bjobs stat %q, want SSUSP", out)
		}
		if out, _, _ := c.run(dir, "troupe-slurm", "squeue", "-h", "-j", id, "-o", "%t"); strings.TrimSpace(out) != "S" {
			t.Errorf("squeue %%t %q, want S", out)
		}
		if out, _, _ := c.run(dir, "bqueue", "-s", "S", "-O", "jobid"); strings.Join(strings.Fields(out), " ") != "JOBID "+id {
			t.Errorf("bqueue -s S: %q, want the suspended job %s alone", out, id)
		}
		if out, _, _ := c.run(dir, "bqueue", "-O", "jobid,state,reason"); !strings.Contains(out, "SUSPENDED") || !strings.Contains(out, "suspended by root") {
			t.Errorf("bqueue: %q, want SUSPENDED and its reason", out)
		}

		// Its CPUs are lent: a job of a whole node (2 cores) starts
		// beside the frozen containers.
		lender := c.bsubAs(t, u, dir, "", nil, jobFile("lent", `
job "lent" {
  resources {
    cpu    = 2
    memory = "64MiB"
  }
  image   = "host"
  command = ["sleep", "2"]
}`))
		c.waitState(lender, 30*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
		// Frozen, the holders write nothing for five times the time
		// they took to write a line before.
		moved := ""
		waitFor(time.Minute, func() bool {
			for _, h := range hosts {
				if n, _, _ := count(t, dir, h); n != before[h] {
					moved = fmt.Sprintf("%s counted on while frozen: %d → %d", h, before[h], n)
					return true
				}
			}
			return time.Since(frozenAt) > 5*every
		})
		if moved != "" {
			t.Error(moved)
		}
		t.Logf("counters still for %v while frozen (a line every %v before)", time.Since(frozenAt).Round(time.Millisecond), every.Round(time.Millisecond))

		// A resume waits for them: the session thaws once the lent
		// job has ended.
		if out, errs, code := c.run(dir, "badmin", "jresume", id); code != 0 || out != "Job <"+id+"> is being resumed\n" {
			t.Fatalf("badmin jresume: exit %d, %q %q", code, out, errs)
		}
		if j := c.job(gang); j.Suspended == nil || !j.Suspended.ResumeWanted || freezerState(ids[0]) != "FROZEN" {
			t.Errorf("resumed while its CPUs were lent: %+v, %s", j.Suspended, freezerState(ids[0]))
		}
		c.waitState(lender, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
		resumed := c.waitState(gang, 30*time.Second, func(j api.Job) bool { return j.Suspended == nil })
		if resumed.SuspendedFor < 500*time.Millisecond {
			t.Errorf("suspended for %v", resumed.SuspendedFor)
		}
		for _, h := range hosts {
			h := h
			if !waitFor(10*time.Second, func() bool { n, _, _ := count(t, dir, h); return n > before[h] }) {
				t.Fatalf("%s does not count on after the resume", h)
			}
			n, crc, first := count(t, dir, h)
			if crc != crcs[h] || crc != first {
				t.Errorf("%s: pattern CRC %s after the resume, %s before, %s at its start", h, crc, crcs[h], first)
			}
			t.Logf("%s: count %d when frozen, %d after the resume, pattern CRC %s intact", h, before[h], n, crc)
		}
		if out, _, _ := c.run(dir, "bjobs", "-noheader", "-o", "stat", id); strings.TrimSpace(out) != "RUN" {
			t.Errorf("bjobs stat after resume %q, want RUN", out)
		}
		if _, errs, code := c.run(dir, "bkill", id); code != 0 {
			t.Fatalf("bkill: %q", errs)
		}
		c.waitState(gang, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
	})

	t.Run("warning signal", func(t *testing.T) {
		flag := filepath.Join(dir, "warned")
		warned := c.bsubAs(t, u, dir, "", nil, jobFile("warn", fmt.Sprintf(`
job "warn" {
  walltime = "6s"
  signal   = { name = "USR1", before = "3s" }
  resources {
    cpu    = 0.5
    memory = "64MiB"
  }
  image   = "host"
  command = ["sh", "-c", "trap 'date +%%s.%%N > %[1]s' USR1; while :; do sleep 0.1; done"]
  mount "work" {
    source = "%[2]s"
    target = "%[2]s"
  }
}`, flag, dir)))
		j := c.waitState(warned, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
		if j.State != api.JobTimeout {
			t.Fatalf("ended %s (%s), want TIMEOUT", j.State, j.Reason)
		}
		b, err := os.ReadFile(flag)
		if err != nil {
			t.Fatalf("main1 never got USR1: %v", err)
		}
		sec, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		at := time.Unix(0, int64(sec*1e9))
		after := at.Sub(j.Started)
		t.Logf("warning signal reached main1 %v after the start (asked: 3 s before a 6 s walltime); the job ended %v after the start", after.Round(time.Millisecond), j.Ended.Sub(j.Started).Round(time.Millisecond))
		if after < 2500*time.Millisecond || after > 4500*time.Millisecond || !at.Before(j.Ended) {
			t.Errorf("USR1 at %v after the start, job ended at %v: want about 3 s, before the end", after, j.Ended.Sub(j.Started))
		}
		if j.Warned.IsZero() || len(j.Signals) != 1 || j.Signals[0].Host != "main1" {
			t.Errorf("warned %v, signals %+v: want one USR1 to main1", j.Warned, j.Signals)
		}
	})
}

// cgroupV1Freezer reports whether the host mounts the cgroup v1 freezer.
func cgroupV1Freezer() bool {
	_, err := os.Stat("/sys/fs/cgroup/freezer")
	return err == nil
}
