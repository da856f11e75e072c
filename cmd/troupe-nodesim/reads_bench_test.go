package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/fdlimit"
)

// readTools are the tools BenchmarkReads times, beside schedd and
// troupe-nodesim.
var readTools = []string{"bjob", "bhist", "bqueue", "bjobs", "bsub", "troupe-slurm"}

// readBinaries returns the directory holding schedd, troupe-nodesim and
// readTools: $BENCH_BIN when set (built at another commit, to compare),
// else dir, where they are built from this tree.
func readBinaries(b *testing.B, dir string) string {
	if bin := os.Getenv("BENCH_BIN"); bin != "" {
		for _, name := range append([]string{"schedd", "troupe-nodesim"}, readTools...) {
			if fi, err := os.Stat(filepath.Join(bin, name)); err != nil || fi.Mode()&0o111 == 0 {
				b.Fatalf("$BENCH_BIN=%s: no executable %s there", bin, name)
			}
		}
		return bin
	}
	pkgs := []string{"build", "-o", dir + "/"}
	for _, name := range append([]string{"schedd", "troupe-nodesim"}, readTools...) {
		pkgs = append(pkgs, "github.com/troupe-hpc/troupe/cmd/"+name)
	}
	build := exec.Command("go", pkgs...)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the binaries: %v\n%s", err, out)
	}
	return dir
}

// nobody is the user whose few jobs bqueue -u and bjobs list among the
// benchmark's (root's) arrays: tools run as this uid are that user.
const nobody = 65534

// BenchmarkReads is `make bench-reads`: a real schedd and troupe-nodesim
// with $NODES simulated nodes of 1,000 cores (default 100: 100,000
// slots), a job array A of $BENCH_ELEMENTS one-core elements (default
// 100,000) of 1 s that ran and went to the accounting store, and a job
// array B as large whose elements all run (for an hour); user nobody
// has 5 held jobs. It then times the real tools' reads of one element
// (bjob, bhist -l, sacct -j), of the store's and of the live array, and
// of nobody's jobs (bqueue -u nobody as root; bjobs as nobody, its
// default view of one's own jobs), each $BENCH_CALLS times (default 10)
// one after another: the median and the slowest wall time of a call,
// the tool's own CPU and schedd's CPU per call (less schedd's idle
// rate). $BENCH_BIN takes prebuilt binaries (another commit's, to
// compare). b.N is ignored: one run is minutes long.
func BenchmarkReads(b *testing.B) {
	nodes := envInt(b, "NODES", 100)
	elems := envInt(b, "BENCH_ELEMENTS", 100000)
	calls := envInt(b, "BENCH_CALLS", 10)
	if elems > nodes*1000 {
		b.Fatalf("BENCH_ELEMENTS=%d: want at most NODES×1000 = %d, so that every element of array B runs", elems, nodes*1000)
	}
	if _, _, err := fdlimit.Raise(); err != nil {
		b.Fatal(err)
	}
	// Not b.TempDir: user nobody must reach schedd's socket.
	dir, err := os.MkdirTemp("", "bench-reads")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		b.Fatal(err)
	}
	bin := readBinaries(b, dir)
	log := benchLog(b, dir)
	row := func(name, format string, args ...any) {
		fmt.Printf("%-46s %s\n", name, fmt.Sprintf(format, args...))
	}
	fmt.Printf("\ntroupe reads benchmark: schedd + troupe-nodesim, %d nodes of 1000 cores, arrays of %d elements, on %d CPUs (binaries %s)\n",
		nodes, elems, runtime.NumCPU(), bin)
	row("load average (1 5 15 min) at start", "%s", loadavg())
	keep := 60 * time.Second
	// A node silent for a while on a loaded machine is not fenced: the
	// figures are of reads, not of leases.
	cl := startCluster(b, log, bin, dir, 1, "", "--keep-ended", keep.String(), "--max-queued-per-user", "0",
		"--max-queued-input-per-user", "0", "--node-timeout", "30m")
	if err := os.Chmod(cl.peers[0].data, 0o711); err != nil {
		b.Fatal(err)
	}
	c, schedd := cl.client, cl.peers[0].proc
	ncmd, nlines := startProc(b, log, filepath.Join(bin, "troupe-nodesim"), append(cl.simArgs, "--nodes", strconv.Itoa(nodes),
		"--cpu", "1000", "--memory", "2000GiB")...)
	waitLine(b, nlines, fmt.Sprintf("troupe-nodesim: %d nodes registered in ", nodes), 10*time.Minute)
	_ = ncmd
	ctx := context.Background()
	submitArray := func(name string, run time.Duration) uint64 {
		req := simJob(name, 1, run, 0)
		req.Spec.Array = &api.ArraySpec{Range: fmt.Sprintf("1-%d", elems)}
		res, err := c.Submit(ctx, req)
		if err != nil {
			b.Fatalf("submitting array %s: %v", name, err)
		}
		return res.JobID
	}
	arrayStates := func(id uint64) map[api.JobState]int {
		j, _, err := c.Job(ctx, id, 0, 0)
		if client.IsNotFound(err) {
			return nil // purged: every element in the store
		}
		if err != nil || j.Array == nil {
			b.Fatalf("array %d: %v", id, err)
		}
		return j.Array.States
	}

	terminal := func(st map[api.JobState]int) int {
		n := 0
		for s, k := range st {
			if s.Terminal() {
				n += k
			}
		}
		return n
	}
	t0 := time.Now()
	a := submitArray("stored", time.Second)
	eventually.NoError(b, 30*time.Minute, "array A's elements all ended", func() error {
		if st := arrayStates(a); st != nil && terminal(st) != elems {
			return fmt.Errorf("states %v", st)
		}
		return nil
	})
	row("array A: all elements ended", "in %s: %v", time.Since(t0).Round(time.Millisecond), arrayStates(a))
	// B starts while A's elements go to the store.
	t1 := time.Now()
	bArr := submitArray("live", time.Hour)
	eventually.NoError(b, 30*time.Minute, "array B's elements all started", func() error {
		if st := arrayStates(bArr); st[api.JobPending]+st[api.JobScheduled]+st[api.JobPreparing] > 0 || terminal(st)+st[api.JobRunning] != elems {
			return fmt.Errorf("states %v", st)
		}
		return nil
	})
	row("array B: all elements started", "in %s: %v", time.Since(t1).Round(time.Millisecond), arrayStates(bArr))
	eventually.NoError(b, 30*time.Minute, "array A's elements all in the accounting store", func() error {
		l, err := c.JobsWhere(ctx, map[string][]string{"state": {string(api.JobCompleted), string(api.JobFailed), string(api.JobNodeFail)},
			"limit": {"1"}}, 0, 0)
		if err != nil || len(l.Jobs) > 0 {
			return fmt.Errorf("still in the state: %d (%v)", len(l.Jobs), err)
		}
		return nil
	})
	row("array A: all elements in the store", "after %s", time.Since(t0).Round(time.Millisecond))
	tool := func(uid int, name string, args ...string) (time.Duration, time.Duration, string, error) {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = "/"
		cmd.Env = []string{"TROUPE_ADDR=" + cl.simArgs[1], "PATH=/usr/bin:/bin", "HOME=/", "TZ=UTC"}
		if uid != 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		}
		t := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(t)
		var cpu time.Duration
		if cmd.ProcessState != nil {
			cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		return took, cpu, string(out), err
	}
	for range 5 {
		if _, _, out, err := tool(nobody, "bsub", "-H", "-J", "nobody-job", "--", "true"); err != nil {
			b.Fatalf("bsub as nobody: %v\n%s", err, out)
		}
	}
	// schedd's CPU while nothing is asked of it (the nodes' heartbeats).
	idle0, it := schedd.cpu(b), time.Now()
	time.Sleep(5 * time.Second)
	idleRate := (schedd.cpu(b) - idle0).Seconds() / time.Since(it).Seconds()
	row("schedd CPU, idle with array B running", "%.3f cores", idleRate)
	rss, _ := schedd.mem(b)
	row("schedd RSS with array B running", "%.0f MiB", float64(rss)/(1<<20))
	el := elems * 7 / 9 // 77,777 of 100,000
	measure := func(label string, uid int, name string, args ...string) {
		var took, cpus []time.Duration
		var last string
		var failed error
		cpu0, w0 := schedd.cpu(b), time.Now()
		for range calls {
			d, cpu, out, err := tool(uid, name, args...)
			took, cpus, last = append(took, d), append(cpus, cpu), out
			if err != nil {
				failed = err
			}
		}
		wall := time.Since(w0)
		server := (schedd.cpu(b) - cpu0).Seconds() - idleRate*wall.Seconds()
		slices.Sort(took)
		slices.Sort(cpus)
		lines := strings.Count(last, "\n")
		status := "ok"
		if failed != nil {
			status = fmt.Sprintf("%v: %s", failed, strings.TrimSpace(last))
		}
		row(label, "p50 %s, max %s over %d; tool CPU p50 %s; schedd CPU %s a call; %d lines out; %s",
			took[len(took)/2].Round(time.Millisecond/10), took[len(took)-1].Round(time.Millisecond/10), calls,
			cpus[len(cpus)/2].Round(time.Millisecond), time.Duration(max(server, 0)/float64(calls)*float64(time.Second)).Round(time.Millisecond/10),
			lines, status)
	}
	as, bs := strconv.FormatUint(a, 10), strconv.FormatUint(bArr, 10)
	ix := strconv.Itoa(el)
	// An element of B that has ended and is still in the state (kept
	// keep-ended before its export): killed now, read first.
	if _, err := c.Control(ctx, api.JobRef{ID: bArr, Index: el + 1, Element: true}, "kill", nil); err != nil {
		b.Fatalf("killing %s[%d]: %v", bs, el+1, err)
	}
	kx := strconv.Itoa(el + 1)
	eventually.NoError(b, 5*time.Minute, "the element killed CANCELLED", func() error {
		j, _, err := c.JobRef(ctx, api.JobRef{ID: bArr, Index: el + 1, Element: true}, 0, 0)
		if err != nil || j.State != api.JobCancelled {
			return fmt.Errorf("%s (%v)", j.State, err)
		}
		return nil
	})
	measure(fmt.Sprintf("bhist -l '%s[%s]' (ended, in the state)", bs, kx), 0, "bhist", "-l", bs+"["+kx+"]")
	measure(fmt.Sprintf("bjob '%s[%s]' (running)", bs, ix), 0, "bjob", bs+"["+ix+"]")
	measure(fmt.Sprintf("bjob '%s[%s]' (in the store)", as, ix), 0, "bjob", as+"["+ix+"]")
	measure(fmt.Sprintf("bhist -l '%s[%s]' (in the store)", as, ix), 0, "bhist", "-l", as+"["+ix+"]")
	measure(fmt.Sprintf("bhist -a -l '%s[%s]' (running)", bs, ix), 0, "bhist", "-a", "-l", bs+"["+ix+"]")
	measure(fmt.Sprintf("sacct -j %s_%s (in the store)", as, ix), 0, "troupe-slurm", "sacct", "-j", as+"_"+ix)
	measure(fmt.Sprintf("sacct -j %s_%s (running)", bs, ix), 0, "troupe-slurm", "sacct", "-j", bs+"_"+ix)
	measure("bqueue -u nobody (5 jobs)", 0, "bqueue", "-u", "nobody")
	measure("bjobs as nobody (own jobs, 5)", nobody, "bjobs")
	measure("bqueue -u nobody as nobody", nobody, "bqueue", "-u", "nobody")
	row("array B at the end", "%v (one killed)", arrayStates(bArr))
	_, peak := schedd.mem(b)
	row("schedd RSS, peak", "%.0f MiB", float64(peak)/(1<<20))
	row("load average (1 5 15 min) at end", "%s", loadavg())
}
