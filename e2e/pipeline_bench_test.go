package e2e

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/freeport"
)

// BenchmarkPipeline (`make bench-pipeline`) puts troupe's one-container
// job pipeline beside the raw runtime, in one run on one machine:
//
//   - troupe: `schedd --dev --nodes 1` (one runc nodelet of 2 cpus),
//     N jobs of one container (1 cpu, /bin/true on a busybox rootfs)
//     submitted in one request (bsub --count N; SUBMIT=batch, the
//     default), or by N bsub processes of one job each, one after the
//     other (SUBMIT=each, as workflow tools and job loops submit), or
//     both in turn on the same cluster (SUBMIT=both, or SUBMIT=each,batch
//     for the other order; printed side by side); jobs/s is N over
//     the first job's submission → the last one's end, as schedd records
//     them;
//   - runc: `runc run` of the same rootfs, /bin/true, N containers two at
//     a time (the node's two cpus), jobs/s over the wall time, for each
//     runc the environment's RUNC names (default: the installed runc;
//     make bench-pipeline adds runc built at the libcontainer version the
//     nodelet links), each with its own `runc spec`;
//   - the ratios; the stages of troupe_job_stage_seconds (p50 and p90
//     interpolated in the histogram's buckets, as histogram_quantile does,
//     and the exact mean), counted over this run only, and the slot each
//     job held (troupe_job_slot_seconds: placed → exit reported) beside
//     the bound, 1.3 × the running stage + 50 ms;
//   - CPU ms per job of schedd, of the nodelet, of what the nodelet ran
//     and reaped (runc, troupe-init…), of the bsub processes (their
//     rusage; one bsub's wall time p50/p90/max beside), of the
//     benchmark's own process (its forks of bsub, its polling), and of
//     the rest of the machine (all busy CPU in /proc/stat less those: the
//     containers, the kernel's work, and any other load on the machine),
//     their sum (the whole machine), and the whole machine's CPU ms and
//     processes per job while each runc ran, for the same comparison in
//     CPU; troupe's own processes' CPU (all but the rest) beside the runc
//     processes' own (their rusage, their containers' included): less
//     sensitive to other load on a shared machine than the rates, though
//     neither counts the kernel's work in its own threads (cgroups,
//     mounts);
//   - scheduling passes per job (the core's plans:
//     troupe_schedd_scheduling_pass_duration_seconds_count);
//   - raft entries per job (troupe_schedd_raft_entries_total), by kind.
//
// N is the environment's N (default 100); OCI_RUNTIME, when set, is the
// nodelet's oci_runtime (auto, crun, libcontainer, runc; default auto);
// RUNC lists the runc binaries to compare with (spaces or commas);
// RUN_DIR=disk leaves the nodelet's run directory on the disk instead of
// the tmpfs the benchmark mounts for it (as /run is on a systemd host).
//
//	sudo N=100 RUNC="runc bin/runc-linked" go test ./e2e -run '^$' -bench '^BenchmarkPipeline$' -benchtime 1x -v
func BenchmarkPipeline(b *testing.B) {
	needRunc(b)
	needBusybox(b)
	n := 100
	if s := os.Getenv("N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 2 {
			b.Fatalf("N=%q: want a whole number of jobs, 2 or more", s)
		}
		n = v
	}
	runcs := runcBaselines(b)
	dir := b.TempDir()
	_ = os.Chmod(dir, 0o755)
	rootfs := busyboxRootfs(b, filepath.Join(dir, "rootfs"))
	metricsAddr := freeport.Addr(b)
	runArgs, runDir, _ := benchRunDir(b, dir)
	if oci := os.Getenv("OCI_RUNTIME"); oci != "" {
		conf := filepath.Join(dir, "nodelet.hcl")
		if err := os.WriteFile(conf, fmt.Appendf(nil, "oci_runtime = %q\n", oci), 0o644); err != nil {
			b.Fatal(err)
		}
		b.Setenv("TROUPE_NODELET_CONFIG", conf)
	}
	c := startCluster(b, 1, "2", append([]string{"--metrics-addr", metricsAddr}, runArgs...)...)
	hosts, errOut, code := c.run(dir, "bhosts", "-o", "json")
	ociName := "?"
	if m := regexp.MustCompile(`"oci_runtime":\s*"([^"]*)"`).FindStringSubmatch(hosts); code == 0 && m != nil {
		ociName = m[1]
	} else {
		b.Logf("bhosts: exit %d: %s%s", code, hosts, errOut)
	}
	cli, err := client.New(c.addr)
	if err != nil {
		b.Fatal(err)
	}
	nodelet := childNamed(b, c.cmd.Process.Pid, "nodelet")
	job := filepath.Join(dir, "true.hcl")
	if err := os.WriteFile(job, fmt.Appendf(nil, `job "true" {
  image   = %q
  command = ["/bin/true"]
  output  = "/dev/null"
  resources {
    cpu    = 1
    memory = "64MiB"
  }
}
`, rootfs), 0o644); err != nil {
		b.Fatal(err)
	}
	modes := submitModes(b)
	for i := 0; i < b.N; i++ {
		var runs []pipelineRun
		for _, mode := range modes {
			runs = append(runs, runPipeline(b, c, cli, metricsAddr, nodelet, dir, job, mode, n))
		}

		// each runc, two at a time
		type baseline struct {
			version string
			rate    float64
			took    time.Duration
			ticks   uint64 // the whole machine's CPU, USER_HZ
			forks   uint64
			own     time.Duration // the runc processes' CPU and their containers' (rusage)
		}
		var bases []baseline
		for k, rc := range runcs {
			t0, f0, o0 := machineTicks(b), forks(b), childrenCPU(b)
			took := runcPairs(b, filepath.Join(dir, fmt.Sprintf("runc-%d", k)), rc.path, rootfs, n)
			bases = append(bases, baseline{rc.version, float64(n) / took.Seconds(), took, machineTicks(b) - t0, forks(b) - f0, childrenCPU(b) - o0})
		}

		w := os.Stdout
		fmt.Fprintf(w, "\npipeline: %d one-container jobs (/bin/true, busybox rootfs), one node of 2 cpus, its run_dir on %s\n", n, runDir)
		fmt.Fprintf(w, "  submitted: %s\n", strings.Join(modeNames(runs), "; "))
		row := func(label, format string, f func(r pipelineRun) float64) {
			fmt.Fprintf(w, "  %-34s", label)
			for _, r := range runs {
				fmt.Fprintf(w, " "+format, f(r))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "  %-34s", "")
		for _, r := range runs {
			fmt.Fprintf(w, " %26s", "SUBMIT="+r.mode)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "  %-34s", "troupe ("+ociName+") jobs/s")
		for _, r := range runs {
			fmt.Fprintf(w, " %8.1f (%14v)", r.rate, r.took.Round(time.Millisecond))
		}
		fmt.Fprintln(w, "  (first submitted → last ended)")
		for _, bl := range bases {
			fmt.Fprintf(w, "  %-34s %8.1f jobs/s  (%v, 2 at a time)\n", "runc run ("+bl.version+")", bl.rate, bl.took.Round(time.Millisecond))
		}
		for _, bl := range bases {
			row("troupe / runc "+bl.version, "%26.2f", func(r pipelineRun) float64 { return r.rate / bl.rate })
		}
		fmt.Fprintf(w, "  stage (troupe_job_stage_seconds)    p50 / p90 / mean ms, each mode\n")
		for _, st := range []string{"queued", "dispatch", "preparing", "running", "ending"} {
			fmt.Fprintf(w, "  %-34s", st)
			for _, r := range runs {
				h := stageHist(r.m0, r.m1, st)
				fmt.Fprintf(w, " %8.1f %8.1f %8.1f", 1000*h.quantile(0.5), 1000*h.quantile(0.9), 1000*h.sum/math.Max(h.count, 1))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "  %-34s", "slot held (placed → exit reported)")
		for _, r := range runs {
			slot := histOf(r.m0, r.m1, "troupe_job_slot_seconds", "")
			fmt.Fprintf(w, " %8.1f %8.1f %8.1f", 1000*slot.quantile(0.5), 1000*slot.quantile(0.9), 1000*slot.sum/math.Max(slot.count, 1))
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "  %-34s", "  1.3 × running + 50 ms")
		for _, r := range runs {
			running := stageHist(r.m0, r.m1, "running")
			fmt.Fprintf(w, " %8.1f %8.1f %8s", 1000*(1.3*running.quantile(0.5)+0.05), 1000*(1.3*running.quantile(0.9)+0.05), "")
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "  %-34s", "one bsub's wall ms p50 / p90 / max")
		for _, r := range runs {
			fmt.Fprintf(w, " %8.1f %8.1f %8.1f", r.bsubWall(0.5), r.bsubWall(0.9), r.bsubWall(1))
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "  CPU ms per job\n")
		per := func(ticks uint64) float64 { return float64(ticks) * 10 / float64(n) } // USER_HZ 100: 10 ms a tick
		row("schedd", "%26.1f", func(r pipelineRun) float64 { return per(r.cpu1.schedd - r.cpu0.schedd) })
		row("nodelet", "%26.1f", func(r pipelineRun) float64 { return per(r.cpu1.nodelet - r.cpu0.nodelet) })
		row("nodelet's reaped children (runc…)", "%26.1f", func(r pipelineRun) float64 { return per(r.cpu1.reaped - r.cpu0.reaped) })
		row("bsub processes (their rusage)", "%26.1f", func(r pipelineRun) float64 { return r.bsubCPU.Seconds() * 1000 / float64(n) })
		row("this benchmark (forks, polling)", "%26.1f", func(r pipelineRun) float64 { return per(r.bench1 - r.bench0) })
		row("rest of the machine", "%26.1f", func(r pipelineRun) float64 {
			all := per(r.cpu1.machine - r.cpu0.machine)
			known := per(r.cpu1.schedd-r.cpu0.schedd+r.cpu1.nodelet-r.cpu0.nodelet+r.cpu1.reaped-r.cpu0.reaped+r.bench1-r.bench0) + r.bsubCPU.Seconds()*1000/float64(n)
			return max(all-known, 0)
		})
		row("the whole machine", "%26.1f", func(r pipelineRun) float64 { return per(r.cpu1.machine - r.cpu0.machine) })
		row("processes per job (/proc/stat)", "%26.1f", func(r pipelineRun) float64 { return float64(r.forks1-r.forks0) / float64(n) })
		for _, bl := range bases {
			fmt.Fprintf(w, "  %-34s %8.1f  (%.1f processes per job)\n", "runc run ("+bl.version+"), the machine", per(bl.ticks), float64(bl.forks)/float64(n))
		}
		// Less sensitive to other load on a shared machine than the
		// rates: the CPU of troupe's own processes beside runc's own.
		own := func(r pipelineRun) float64 {
			return per(r.cpu1.schedd-r.cpu0.schedd+r.cpu1.nodelet-r.cpu0.nodelet+r.cpu1.reaped-r.cpu0.reaped) + r.bsubCPU.Seconds()*1000/float64(n)
		}
		row("troupe's processes (all but rest)", "%26.1f", own)
		for _, bl := range bases {
			ms := bl.own.Seconds() * 1000 / float64(n)
			fmt.Fprintf(w, "  %-34s %8.1f  (rusage)\n", "runc run ("+bl.version+"), its processes", ms)
		}
		row("scheduling passes per job", "%26.2f", func(r pipelineRun) float64 {
			return (r.m1["troupe_schedd_scheduling_pass_duration_seconds_count"] - r.m0["troupe_schedd_scheduling_pass_duration_seconds_count"]) / float64(n)
		})
		for _, r := range runs {
			kinds, total := raftEntries(r.m0, r.m1, n)
			fmt.Fprintf(w, "  %-34s %8.2f  (%s)\n", "raft entries per job, "+r.mode, total, strings.Join(kinds, ", "))
		}
		if load, err := os.ReadFile("/proc/loadavg"); err == nil {
			fmt.Fprintf(w, "  load average: %s\n", strings.TrimSpace(string(load)))
		}
		for k, r := range runs {
			suffix := ""
			if k > 0 || len(runs) > 1 && r.mode != "batch" {
				suffix = "-" + r.mode
			}
			b.ReportMetric(r.rate, "jobs/s"+suffix)
			for k, bl := range bases {
				rs := ""
				if k > 0 {
					rs = "-runc-" + bl.version
				}
				b.ReportMetric(r.rate/bl.rate, "ratio"+suffix+rs)
			}
			slot := histOf(r.m0, r.m1, "troupe_job_slot_seconds", "")
			b.ReportMetric(1000*slot.quantile(0.9), "slot-p90-ms"+suffix)
			_, total := raftEntries(r.m0, r.m1, n)
			b.ReportMetric(total, "raft-entries/job"+suffix)
		}
		for k, bl := range bases {
			suffix := ""
			if k > 0 {
				suffix = "-runc-" + bl.version
			}
			b.ReportMetric(bl.rate, "runc-jobs/s"+suffix)
		}
	}
}

// submitModes are the ways of submitting the environment's SUBMIT names,
// in turn: batch (the default: one bsub --count N request), each (N bsub
// processes one after the other, one job each, as workflow tools and job
// loops submit), both (batch, then each, in the same run), or a list of
// them separated by commas (each,batch: the other order).
func submitModes(b *testing.B) []string {
	s := os.Getenv("SUBMIT")
	switch s {
	case "":
		return []string{"batch"}
	case "both":
		return []string{"batch", "each"}
	}
	modes := strings.Split(s, ",")
	for _, m := range modes {
		if m != "batch" && m != "each" {
			b.Fatalf("SUBMIT=%q: want batch, each, both, or a list of batch and each separated by commas", s)
		}
	}
	return modes
}

// pipelineRun is what one troupe run of the pipeline measured.
type pipelineRun struct {
	mode           string
	rate           float64       // jobs/s, first submitted → last ended
	took           time.Duration // first submitted → last ended
	m0, m1         map[string]float64
	cpu0, cpu1     cpuTicks
	bench0, bench1 uint64 // this process's CPU (not its children's), USER_HZ
	forks0, forks1 uint64
	bsubs          int             // bsub processes run
	bsubCPU        time.Duration   // their user and system CPU, from their rusage
	walls          []time.Duration // each bsub's wall time, sorted
}

func modeNames(runs []pipelineRun) []string {
	var out []string
	for _, r := range runs {
		switch r.mode {
		case "batch":
			out = append(out, "batch: one `bsub --count N JOBFILE`")
		case "each":
			out = append(out, fmt.Sprintf("each: %d `bsub JOBFILE` processes one after the other", r.bsubs))
		}
	}
	return out
}

// bsubWall is the q-quantile of one bsub's wall time, in ms (the
// nearest rank).
func (r pipelineRun) bsubWall(q float64) float64 {
	if len(r.walls) == 0 {
		return 0
	}
	i := min(int(math.Ceil(q*float64(len(r.walls))))-1, len(r.walls)-1)
	return float64(r.walls[max(i, 0)].Microseconds()) / 1000
}

// runPipeline submits n copies of job the mode's way and waits until
// every one has ended.
func runPipeline(b *testing.B, c *devCluster, cli *client.Client, metricsAddr string, nodelet int, dir, job, mode string, n int) pipelineRun {
	r := pipelineRun{mode: mode}
	r.m0 = scrapeSeries(b, metricsAddr)
	r.cpu0 = readCPU(b, c.cmd.Process.Pid, nodelet)
	r.bench0 = selfTicks(b)
	r.forks0 = forks(b)
	var ids []uint64
	bsub := func(args ...string) []uint64 {
		out, cpu, took := bsubRusage(b, c, dir, args...)
		r.bsubs++
		r.bsubCPU += cpu
		r.walls = append(r.walls, took)
		var got []uint64
		for _, m := range submittedAll.FindAllStringSubmatch(out, -1) {
			id, _ := strconv.ParseUint(m[1], 10, 64)
			got = append(got, id)
		}
		return got
	}
	switch mode {
	case "batch":
		ids = bsub("--count", strconv.Itoa(n), job)
	case "each":
		for range n {
			ids = append(ids, bsub(job)...)
		}
	}
	if len(ids) != n {
		b.Fatalf("SUBMIT=%s: %d jobs submitted, want %d", mode, len(ids), n)
	}
	slices.Sort(r.walls)
	jobs := waitAllEnded(b, cli, ids, 10*time.Minute)
	r.cpu1 = readCPU(b, c.cmd.Process.Pid, nodelet)
	r.bench1 = selfTicks(b)
	r.forks1 = forks(b)
	r.m1 = scrapeSeries(b, metricsAddr)
	first, last := jobs[0].Submitted, jobs[0].Ended
	for _, j := range jobs {
		if j.State != api.JobCompleted {
			b.Fatalf("job %d ended %s (%s)", j.ID, j.State, j.Reason)
		}
		if j.Submitted.Before(first) {
			first = j.Submitted
		}
		if j.Ended.After(last) {
			last = j.Ended
		}
	}
	r.took = last.Sub(first)
	r.rate = float64(n) / r.took.Seconds()
	return r
}

// bsubRusage runs bin/bsub with args in dir against c, and answers its
// standard output, the CPU it spent (user and system, its rusage) and
// its wall time; it fails b unless bsub exits 0.
func bsubRusage(b *testing.B, c *devCluster, dir string, args ...string) (string, time.Duration, time.Duration) {
	b.Helper()
	cmd := exec.Command(bin+"/bsub", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TROUPE_ADDR="+c.addr)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	took := time.Since(began)
	if err != nil {
		b.Fatalf("bsub %s: %v: %s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), took
}

// selfTicks is this process's own user and system CPU, USER_HZ ticks.
func selfTicks(b *testing.B) uint64 {
	t := procTicks(b, os.Getpid())
	return t[0] + t[1]
}

// childrenCPU is the user and system CPU of this process's children
// that have ended and been waited for, and of theirs.
func childrenCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// raftEntries are the raft entries per job committed between two
// scrapes, by kind ("kind n.nn"), and in all.
func raftEntries(m0, m1 map[string]float64, n int) ([]string, float64) {
	var kinds []string
	total := 0.0
	for k, v := range m1 {
		if kind, ok := strings.CutPrefix(k, `troupe_schedd_raft_entries_total{kind="`); ok {
			if d := v - m0[k]; d > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %.2f", strings.TrimSuffix(kind, `"}`), d/float64(n)))
				total += d
			}
		}
	}
	slices.Sort(kinds)
	return kinds, total / float64(n)
}

// benchRunDir puts the dev nodelets' run directories on a tmpfs it
// mounts in dir, as /run is on a systemd host, and answers the schedd
// --dev arguments that say so, where they are ("tmpfs" or "disk"), and
// a directory there for the benchmark's own runtime state (runc's).
// RUN_DIR=disk leaves them where the dev cluster puts them by default:
// under its state directory, on this machine's disk (the state goes in
// dir).
func benchRunDir(b *testing.B, dir string) (args []string, where, path string) {
	switch os.Getenv("RUN_DIR") {
	case "", "tmpfs":
	case "disk":
		return nil, "disk", dir
	default:
		b.Fatalf("RUN_DIR=%q: want tmpfs or disk", os.Getenv("RUN_DIR"))
	}
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := unix.Mount("tmpfs", run, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,size=1g"); err != nil {
		b.Fatalf("tmpfs for the run directories: %v", err)
	}
	b.Cleanup(func() { _ = unix.Unmount(run, unix.MNT_DETACH) })
	return []string{"--dev-run-dir", run}, "tmpfs", run
}

// bsubCount submits n copies of job file job in one request (bsub
// --count), from dir, and answers their ids.
func bsubCount(b *testing.B, c *devCluster, dir, job string, n int) []uint64 {
	b.Helper()
	out, errOut, code := c.run(dir, "bsub", "--count", strconv.Itoa(n), job)
	if code != 0 {
		b.Fatalf("bsub --count %d: exit %d: %s%s", n, code, out, errOut)
	}
	var ids []uint64
	for _, m := range submittedAll.FindAllStringSubmatch(out, -1) {
		id, _ := strconv.ParseUint(m[1], 10, 64)
		ids = append(ids, id)
	}
	if len(ids) != n {
		b.Fatalf("bsub --count %d submitted %d jobs:\n%s", n, len(ids), out)
	}
	return ids
}

var submittedAll = regexp.MustCompile(`(?m)^Job <(\d+)> is submitted`)

// busyboxRootfs makes a rootfs of the static busybox with the
// mountpoints runc wants, so that a read-only root needs no writes.
func busyboxRootfs(b *testing.B, root string) string {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []string{"bin", "dev", "proc", "sys", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if out, err := exec.Command("cp", bb, filepath.Join(root, "bin", "busybox")).CombinedOutput(); err != nil {
		b.Fatalf("copying busybox: %v: %s", err, out)
	}
	for _, l := range []string{"true", "sh"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", l)); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// childNamed is the pid of pid's child whose command is name.
func childNamed(b *testing.B, pid int, name string) int {
	if ps := childrenNamed(pid, name); len(ps) > 0 {
		return ps[0]
	}
	b.Fatalf("no %s among the children of pid %d", name, pid)
	return 0
}

// childrenNamed are the pids of pid's children whose command is name.
func childrenNamed(pid int, name string) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		raw, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(raw)) {
			comm, _ := os.ReadFile("/proc/" + f + "/comm")
			if strings.TrimSpace(string(comm)) == name {
				p, _ := strconv.Atoi(f)
				out = append(out, p)
			}
		}
	}
	return out
}

// cpuTicks are CPU times in USER_HZ ticks.
type cpuTicks struct{ schedd, nodelet, reaped, machine uint64 }

func readCPU(b *testing.B, schedd, nodelet int) cpuTicks {
	var t cpuTicks
	var sk, nk [4]uint64
	sk, nk = procTicks(b, schedd), procTicks(b, nodelet)
	t.schedd, t.nodelet, t.reaped = sk[0]+sk[1], nk[0]+nk[1], nk[2]+nk[3]
	t.machine = machineTicks(b)
	return t
}

// machineTicks is the CPU the whole machine spent since boot, in clock
// ticks: /proc/stat's user, nice, system, irq, softirq and steal.
func machineTicks(b *testing.B) uint64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	var t uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseUint(f[i], 10, 64)
		t += v
	}
	return t
}

// forks is /proc/stat's count of processes (and threads) created since
// boot.
func forks(b *testing.B) uint64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "processes "); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	b.Fatal("/proc/stat: no processes line")
	return 0
}

// procTicks is pid's utime, stime, cutime and cstime.
func procTicks(b *testing.B, pid int) [4]uint64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // from field 3, state
	var out [4]uint64
	for i := range out {
		out[i], _ = strconv.ParseUint(f[11+i], 10, 64) // fields 14-17
	}
	return out
}

// waitAllEnded waits until every one of ids has ended and returns them.
// It asks for the jobs that have not ended alone (ended=false), every
// half second, and for the whole list once at the end: the rates come
// from schedd's timestamps, not from when this notices, and its polling
// is CPU the machine spends beside troupe's work (runc's baselines have
// none), so it asks little and seldom.
func waitAllEnded(b *testing.B, cli *client.Client, ids []uint64, timeout time.Duration) []api.Job {
	want := map[uint64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.Now().Add(timeout)
	for {
		l, err := cli.JobsWhere(context.Background(), url.Values{"ended": {"false"}}, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		live := 0
		for _, j := range l.Jobs {
			if want[j.ID] {
				live++
			}
		}
		if live == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d jobs still not ended after %v", live, len(ids), timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
	l, err := cli.Jobs(context.Background(), 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	var ended []api.Job
	for _, j := range l.Jobs {
		if want[j.ID] && j.State.Terminal() {
			ended = append(ended, j)
		}
	}
	if len(ended) != len(ids) {
		b.Fatalf("%d of %d jobs ended, the others gone from the list", len(ended), len(ids))
	}
	return ended
}

// runcBin is a runc the raw rate is measured with.
type runcBin struct{ path, version string }

// runcBaselines are the runcs of the environment's RUNC (paths or
// names, separated by spaces or commas; default the installed runc),
// each with the version its --version gives.
func runcBaselines(b *testing.B) []runcBin {
	list := strings.FieldsFunc(os.Getenv("RUNC"), func(r rune) bool { return r == ',' || r == ' ' })
	if len(list) == 0 {
		list = []string{"runc"}
	}
	var out []runcBin
	for _, p := range list {
		raw, err := exec.Command(p, "--version").Output()
		if err != nil {
			b.Fatalf("RUNC: %s --version: %v", p, err)
		}
		first, _, _ := strings.Cut(string(raw), "\n")
		v, ok := strings.CutPrefix(first, "runc version ")
		if !ok {
			b.Fatalf("RUNC: %s --version: not a runc: %q", p, first)
		}
		out = append(out, runcBin{p, strings.TrimSpace(v)})
	}
	return out
}

// runcBundle makes dir/bundle with the given runc's own `runc spec`,
// rootfs as its read-only root and no terminal, edit's changes to the
// spec's process and linux sections, and dir/runc-state for runc's
// --root; it answers both.
func runcBundle(b *testing.B, dir, runc, rootfs string, edit func(proc, linux map[string]any)) (bundle, state string) {
	bundle, state = filepath.Join(dir, "bundle"), filepath.Join(dir, "runc-state")
	for _, d := range []string{bundle, state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	cmd := exec.Command(runc, "spec")
	cmd.Dir = bundle
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("runc spec: %v: %s", err, out)
	}
	path := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		b.Fatal(err)
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	spec["root"] = map[string]any{"path": rootfs, "readonly": true}
	edit(proc, spec["linux"].(map[string]any))
	if raw, err = json.Marshal(spec); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		b.Fatal(err)
	}
	return bundle, state
}

// runcPairs runs n containers of /bin/true on rootfs (read-only) with
// `runc run` of the given runc (and its own `runc spec`), two at a time,
// in dir, and answers the wall time.
func runcPairs(b *testing.B, dir, runc, rootfs string, n int) time.Duration {
	bundle, state := runcBundle(b, dir, runc, rootfs, func(proc, _ map[string]any) {
		proc["args"] = []string{"/bin/true"}
	})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	began := time.Now()
	for w := range 2 {
		wg.Go(func() {
			for k := w; k < n; k += 2 {
				id := fmt.Sprintf("pipeline-%d-%d", os.Getpid(), k)
				if out, err := exec.Command(runc, "--root", state, "run", "--bundle", bundle, id).CombinedOutput(); err != nil {
					errs <- fmt.Errorf("runc run %s: %v: %s", id, err, out)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return took
}

// scrapeSeries reads schedd's metrics: each sample's series (name and
// labels, as exposed) → value.
func scrapeSeries(b *testing.B, addr string) map[string]float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	return out
}

// hist is one stage's histogram, the difference of two scrapes.
type hist struct {
	les        []float64 // upper bounds, ascending, +Inf last
	cum        []float64 // cumulative counts
	sum, count float64
}

var leLabel = regexp.MustCompile(`le="([^"]+)"`)

func stageHist(m0, m1 map[string]float64, stage string) hist {
	return histOf(m0, m1, "troupe_job_stage_seconds", fmt.Sprintf(`stage=%q`, stage))
}

// histOf is the histogram name (of the series whose labels include sel,
// or of the only series when sel is empty), the difference of two
// scrapes.
func histOf(m0, m1 map[string]float64, name, sel string) hist {
	var h hist
	type bucket struct{ le, n float64 }
	var bs []bucket
	for k, v := range m1 {
		if strings.HasPrefix(k, name+"_bucket{") && strings.Contains(k, sel) {
			le, err := strconv.ParseFloat(leLabel.FindStringSubmatch(k)[1], 64)
			if err == nil {
				bs = append(bs, bucket{le, v - m0[k]})
			}
		}
	}
	slices.SortFunc(bs, func(x, y bucket) int { return cmp.Compare(x.le, y.le) })
	for _, bk := range bs {
		h.les, h.cum = append(h.les, bk.le), append(h.cum, bk.n)
	}
	labels := ""
	if sel != "" {
		labels = "{" + sel + "}"
	}
	h.sum = m1[name+"_sum"+labels] - m0[name+"_sum"+labels]
	h.count = m1[name+"_count"+labels] - m0[name+"_count"+labels]
	return h
}

// quantile interpolates linearly within the bucket the q-quantile falls
// in, as Prometheus's histogram_quantile does; 0 without observations.
func (h hist) quantile(q float64) float64 {
	if len(h.cum) == 0 || h.cum[len(h.cum)-1] == 0 {
		return 0
	}
	rank := q * h.cum[len(h.cum)-1]
	for i, c := range h.cum {
		if c < rank {
			continue
		}
		lo, below := 0.0, 0.0
		if i > 0 {
			lo, below = h.les[i-1], h.cum[i-1]
		}
		if math.IsInf(h.les[i], 1) {
			return lo
		}
		if c == below {
			return h.les[i]
		}
		return lo + (h.les[i]-lo)*(rank-below)/(c-below)
	}
	return h.les[len(h.les)-2]
}
