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
//     submitted in one request (bsub --count N); jobs/s is N over the
//     first job's submission → the last one's end, as schedd records them;
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
//     and reaped (runc, troupe-init…), and of the rest of the machine
//     (all busy CPU in /proc/stat less those: bsub, the polling, the
//     containers, the kernel's work, and any other load on the machine),
//     their sum (the whole machine), and the whole machine's CPU ms and
//     processes per job while each runc ran, for the same comparison in
//     CPU;
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
	for i := 0; i < b.N; i++ {
		// troupe
		m0 := scrapeSeries(b, metricsAddr)
		cpu0 := readCPU(b, c.cmd.Process.Pid, nodelet)
		forks0 := forks(b)
		ids := bsubCount(b, c, dir, job, n)
		jobs := waitAllEnded(b, cli, ids, 10*time.Minute)
		cpu1 := readCPU(b, c.cmd.Process.Pid, nodelet)
		forks1 := forks(b)
		m1 := scrapeSeries(b, metricsAddr)
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
		troupeRate := float64(n) / last.Sub(first).Seconds()

		// each runc, two at a time
		type baseline struct {
			version string
			rate    float64
			took    time.Duration
			ticks   uint64 // the whole machine's CPU, USER_HZ
			forks   uint64
		}
		var bases []baseline
		for k, rc := range runcs {
			t0, f0 := machineTicks(b), forks(b)
			took := runcPairs(b, filepath.Join(dir, fmt.Sprintf("runc-%d", k)), rc.path, rootfs, n)
			bases = append(bases, baseline{rc.version, float64(n) / took.Seconds(), took, machineTicks(b) - t0, forks(b) - f0})
		}

		w := os.Stdout
		fmt.Fprintf(w, "\npipeline: %d one-container jobs (/bin/true, busybox rootfs), one node of 2 cpus, its run_dir on %s\n", n, runDir)
		fmt.Fprintf(w, "  %-34s %8.1f jobs/s  (%v submitted → last ended)\n", "troupe ("+ociName+")", troupeRate, last.Sub(first).Round(time.Millisecond))
		for _, bl := range bases {
			fmt.Fprintf(w, "  %-34s %8.1f jobs/s  (%v, 2 at a time)\n", "runc run ("+bl.version+")", bl.rate, bl.took.Round(time.Millisecond))
		}
		for _, bl := range bases {
			fmt.Fprintf(w, "  %-34s %8.2f\n", "troupe / runc "+bl.version, troupeRate/bl.rate)
		}
		fmt.Fprintf(w, "  stage (troupe_job_stage_seconds)      p50 ms   p90 ms  mean ms  count\n")
		for _, st := range []string{"queued", "dispatch", "preparing", "running", "ending"} {
			h := stageHist(m0, m1, st)
			fmt.Fprintf(w, "  %-34s %8.1f %8.1f %8.1f %6d\n", st, 1000*h.quantile(0.5), 1000*h.quantile(0.9), 1000*h.sum/math.Max(h.count, 1), int(h.count))
		}
		slot, running := histOf(m0, m1, "troupe_job_slot_seconds", ""), stageHist(m0, m1, "running")
		fmt.Fprintf(w, "  %-34s %8.1f %8.1f %8.1f %6d\n", "slot held (placed → exit reported)", 1000*slot.quantile(0.5), 1000*slot.quantile(0.9), 1000*slot.sum/math.Max(slot.count, 1), int(slot.count))
		fmt.Fprintf(w, "  %-34s %8.1f %8.1f\n", "  1.3 × running + 50 ms", 1000*(1.3*running.quantile(0.5)+0.05), 1000*(1.3*running.quantile(0.9)+0.05))
		fmt.Fprintf(w, "  CPU ms per job\n")
		per := func(ticks uint64) float64 { return float64(ticks) * 10 / float64(n) } // USER_HZ 100: 10 ms a tick
		sd, nd, kids, all := cpu1.schedd-cpu0.schedd, cpu1.nodelet-cpu0.nodelet, cpu1.reaped-cpu0.reaped, cpu1.machine-cpu0.machine
		fmt.Fprintf(w, "  %-34s %8.1f\n", "schedd", per(sd))
		fmt.Fprintf(w, "  %-34s %8.1f\n", "nodelet", per(nd))
		fmt.Fprintf(w, "  %-34s %8.1f\n", "nodelet's reaped children (runc…)", per(kids))
		fmt.Fprintf(w, "  %-34s %8.1f\n", "rest of the machine", per(all-min(all, sd+nd+kids)))
		fmt.Fprintf(w, "  %-34s %8.1f\n", "the whole machine", per(all))
		fmt.Fprintf(w, "  %-34s %8.1f  (the whole machine's forks and clones, /proc/stat)\n", "processes per job", float64(forks1-forks0)/float64(n))
		for _, bl := range bases {
			fmt.Fprintf(w, "  %-34s %8.1f  (%.1f processes per job)\n", "runc run ("+bl.version+"), the machine", per(bl.ticks), float64(bl.forks)/float64(n))
		}
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
		fmt.Fprintf(w, "  %-34s %8.2f  (%s)\n", "raft entries per job", total/float64(n), strings.Join(kinds, ", "))
		if load, err := os.ReadFile("/proc/loadavg"); err == nil {
			fmt.Fprintf(w, "  load average: %s\n", strings.TrimSpace(string(load)))
		}
		b.ReportMetric(troupeRate, "jobs/s")
		for k, bl := range bases {
			suffix := ""
			if k > 0 {
				suffix = "-runc-" + bl.version
			}
			b.ReportMetric(bl.rate, "runc-jobs/s"+suffix)
			b.ReportMetric(troupeRate/bl.rate, "ratio"+suffix)
		}
		b.ReportMetric(1000*slot.quantile(0.9), "slot-p90-ms")
		b.ReportMetric(total/float64(n), "raft-entries/job")
	}
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
