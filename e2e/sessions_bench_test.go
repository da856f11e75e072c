package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/freeport"
)

// BenchmarkSessionBurst (`make bench-sessions`) measures issue 17's
// session target: SESSIONS cluster sessions of SIZE containers each,
// submitted in one request (bsub --count SESSIONS), on a dev cluster
// with room for all of them at once:
//
//   - `schedd --dev --nodes NODES` (runc nodelets, each in a test host of
//     its own), every node with the cpus and memory of its share of the
//     sessions, so that none waits for room;
//   - each session is a job of `cluster { size = SIZE }` (single-node
//     mode: a private session bridge per session), each container 0.1
//     cpu and 64MiB on a busybox rootfs, whose command (main1's and the
//     subs') first prints the wall clock, busybox `ts %.s` (µs), then
//     sleeps; once every container has printed (the benchmark polls
//     their output files), `bkill -d` ends them all COMPLETED, so that no
//     session's teardown runs beside another's start;
//   - per session, submit → first output: from schedd's record of the
//     submission to main1's printed time (both this host's clock), and
//     to the last of its containers' (every command running), p50, p90,
//     p99 and max; submit → all containers running as schedd recorded it
//     (the job's started − submitted);
//   - the stages of troupe_job_stage_seconds as BenchmarkPipeline prints
//     them, counted over this run only; CPU ms per session of schedd, of
//     the nodelets, of what they ran and reaped (the containers' inits
//     and everything in them), and of the rest of the machine, from the
//     submission until every container printed (the start), and until
//     every session ended (start, bkill and teardown); the load average
//     before and after;
//   - before that, the runtime's own figure for the same burst: the same
//     SESSIONS×SIZE containers (command, rootfs, cpu quota, memory limit)
//     started at once by as many `runc run --detach`, with every runc of
//     RUNC (as BenchmarkPipeline's baselines; default the installed
//     runc), each with its own network namespace holding loopback only;
//     per group of SIZE, launch → the first one's and every one's first
//     output, troupe's every-container p99 over runc's, and the
//     machine's CPU per group until all printed beside troupe's.
//
// RUNTIME picks what runs the nodes (sessionRuntime): runc, the
// default, as above; fake, the same dev nodelets with the fake OCI
// runtime (nodelet.hcl's oci_runtime = "fake" with
// benchmark_fake_runtime = true: each container prepared as for runc,
// its first output the wall clock where runc would start it, nothing
// run), troupe's own share without runc's and no runc baseline;
// nodesim, troupe-nodesim's simulated nodes beside one dev nodelet too
// small for a session, each container's first output written as it
// starts running (--first-output), schedd's share alone.
//
// SESSIONS defaults to 100, SIZE to 4, NODES to 4, CPU (each
// container's cpu, a CFS quota) to 0.1. With STEPS=1 the
// nodelets run with -v and the benchmark prints, from their log, the
// median and p90 of each step of a container's start ("container
// started", steps.*=). OCI_RUNTIME, when set, is the nodelets'
// oci_runtime (RUNTIME=runc only). The nodelets' run directories are on a tmpfs the
// benchmark mounts, as /run is on a systemd host (RUN_DIR=disk: not).
//
// TROUPE_E2E_BIN=dir runs it with prebuilt binaries (dir holds schedd,
// nodelet, bsub, bhosts, troupe-init, troupe-ssh… as `make build` puts
// them in bin/), so a test binary built here (`go test -c ./e2e`) runs
// where Go is not:
//
//	sudo SESSIONS=100 go test ./e2e -run '^$' -bench '^BenchmarkSessionBurst$' -benchtime 1x -v
//	sudo TROUPE_E2E_BIN=$PWD/bin ./e2e.test -test.run '^$' -test.bench '^BenchmarkSessionBurst$' -test.benchtime 1x -test.v
func BenchmarkSessionBurst(b *testing.B) {
	mode, err := sessionRuntime(os.Getenv("RUNTIME"), os.Getenv("OCI_RUNTIME"))
	if err != nil {
		b.Fatal(err)
	}
	if mode == sessionRunc {
		needRunc(b)
	} else if os.Geteuid() != 0 {
		b.Skip("SKIP: the session burst needs root (the run directories' tmpfs, the dev cluster's test hosts and session networks)")
	}
	needBusybox(b)
	sessions, size, nodes := envInt(b, "SESSIONS", 100, 1), envInt(b, "SIZE", 4, 1), envInt(b, "NODES", 4, 1)
	steps := os.Getenv("STEPS") == "1"
	const memMiB = 64
	cpu := 0.1
	if s := os.Getenv("CPU"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 {
			b.Fatalf("CPU=%q: want the cpus of each container, more than 0", s)
		}
		cpu = v
	}
	dir := b.TempDir()
	_ = os.Chmod(dir, 0o755)
	rootfs := busyboxRootfs(b, filepath.Join(dir, "rootfs"))
	for _, l := range []string{"ts", "sleep", "echo"} {
		if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", l)); err != nil {
			b.Fatal(err)
		}
	}
	var conf string
	switch {
	case mode == sessionFake:
		conf = "oci_runtime = \"fake\"\nbenchmark_fake_runtime = true\n"
	case os.Getenv("OCI_RUNTIME") != "":
		conf = fmt.Sprintf("oci_runtime = %q\n", os.Getenv("OCI_RUNTIME"))
	}
	if conf != "" {
		p := filepath.Join(dir, "nodelet.hcl")
		if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
			b.Fatal(err)
		}
		b.Setenv("TROUPE_NODELET_CONFIG", p)
	}
	// Room for every session at once, single-node sessions whole on a
	// node: ceil(sessions / nodes) of them a node, and a margin.
	perNode := (sessions + nodes - 1) / nodes
	nodeCPU := math.Ceil(float64(perNode*size)*cpu) + 1
	nodeMem := fmt.Sprintf("%dMiB", perNode*size*memMiB+1024)
	metricsAddr := freeport.Addr(b)
	runArgs, runDir, rawDir := benchRunDir(b, dir)
	extra := append([]string{"--metrics-addr", metricsAddr, "--node-memory", nodeMem}, runArgs...)
	if steps {
		extra = append(extra, "-v")
	}
	var c *devCluster
	if steps {
		// Cleanups run last first: this one after the cluster's stop,
		// when its log is complete.
		b.Cleanup(func() {
			if c != nil {
				printSteps(c.log.String())
			}
		})
	}
	var nodelets []int // the processes that run the nodes: the nodelets, or troupe-nodesim
	if mode == sessionNodesim {
		// One dev nodelet too small for any session (schedd --dev
		// starts at least one), and the simulated nodes beside it.
		c = startCluster(b, 1, "0.1", "--metrics-addr", metricsAddr, "--node-memory", "256MiB", "--runtime", "process")
		nodelets = []int{startNodesim(b, c.addr, nodes, nodeCPU, nodeMem)}
	} else {
		c = startCluster(b, nodes, strconv.FormatFloat(nodeCPU, 'f', -1, 64), extra...)
		nodelets = childrenNamed(c.cmd.Process.Pid, "nodelet")
		if len(nodelets) != nodes {
			b.Fatalf("%d nodelets among schedd's children, want %d", len(nodelets), nodes)
		}
	}
	cli, err := client.New(c.addr)
	if err != nil {
		b.Fatal(err)
	}
	cmd := `echo | ts %.s; exec sleep 600`
	job := filepath.Join(dir, "burst.hcl")
	if err := os.WriteFile(job, fmt.Appendf(nil, `job "burst" {
  image   = %[1]q
  command = ["sh", "-c", %[2]q]
  output  = %[3]q
  cluster {
    size = %[4]d
  }
  resources {
    cpu    = %[5]g
    memory = "%[6]dMiB"
  }
  role "sub" {
    command = ["sh", "-c", %[2]q]
  }
}
`, rootfs, cmd, filepath.Join(dir, "out", "burst-%j.%h.out"), size, cpu, memMiB), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
		b.Fatal(err)
	}
	var runcs []runcBin
	if mode == sessionRunc {
		runcs = runcBaselines(b) // their bundles and state in rawDir, beside the nodelets' run directories
	}
	for i := 0; i < b.N; i++ {
		// The runtime's own figure first, on the idle cluster's machine:
		// runc delete is done when it returns, while a session's
		// teardown goes on after the job ended.
		type rawBurst struct {
			version         string
			mainOut, allOut []float64
			ticks           uint64
		}
		var raws []rawBurst
		for k, rc := range runcs {
			tag := fmt.Sprintf("runc-%d-%d", i, k)
			firsts, ticks := runcBurst(b, filepath.Join(rawDir, tag), filepath.Join(dir, "out-"+tag), rc.path, rootfs, cmd, sessions*size, cpu, memMiB)
			r := rawBurst{version: rc.version, ticks: ticks}
			for s := range sessions {
				grp := firsts[s*size : (s+1)*size]
				r.mainOut, r.allOut = append(r.mainOut, grp[0]), append(r.allOut, slices.Max(grp))
			}
			raws = append(raws, r)
		}
		load0 := loadAvg()
		m0 := scrapeSeries(b, metricsAddr)
		cpu0 := sessionCPU(b, c.cmd.Process.Pid, nodelets)
		ids := bsubCount(b, c, dir, job, sessions)
		var outs []string
		for _, id := range ids {
			for k := range size {
				host := "main1"
				if k > 0 {
					host = fmt.Sprintf("sub%d", k)
				}
				outs = append(outs, filepath.Join(dir, "out", fmt.Sprintf("burst-%d.%s.out", id, host)))
			}
		}
		waitPrinted(b, outs, 10*time.Minute)
		cpuStart := sessionCPU(b, c.cmd.Process.Pid, nodelets)
		load1 := loadAvg()
		// A container may print before its running report reaches
		// schedd (troupe-nodesim's, the fake runtime's first output
		// comes first): kill none that schedd has not seen running.
		waitAllRunning(b, cli, ids, time.Minute)
		kill := []string{"-d"}
		for _, id := range ids {
			kill = append(kill, strconv.FormatUint(id, 10))
		}
		if out, errOut, code := c.run(dir, "bkill", kill...); code != 0 {
			b.Fatalf("bkill -d: exit %d: %s%s", code, out, errOut)
		}
		jobs := waitAllEnded(b, cli, ids, 10*time.Minute)
		cpu1 := sessionCPU(b, c.cmd.Process.Pid, nodelets)
		m1 := scrapeSeries(b, metricsAddr)

		var mainOut, allOut, running []float64 // seconds after submission
		missing, used := 0, map[string]bool{}
		for _, j := range jobs {
			if j.State != api.JobCompleted {
				b.Fatalf("job %d ended %s (%s)", j.ID, j.State, j.Reason)
			}
			if !j.Started.IsZero() {
				running = append(running, j.Started.Sub(j.Submitted).Seconds())
			}
			last := 0.0
			complete := true
			for _, ct := range j.Containers {
				used[ct.Node] = true
				t, ok := firstOutput(filepath.Join(dir, "out", fmt.Sprintf("burst-%d.%s.out", j.ID, ct.Host)))
				if !ok {
					missing++
					complete = false
					continue
				}
				d := t.Sub(j.Submitted).Seconds()
				last = max(last, d)
				if ct.Host == "main1" {
					mainOut = append(mainOut, d)
				}
			}
			if complete {
				allOut = append(allOut, last)
			}
		}

		w := os.Stdout
		fmt.Fprintf(w, "\nsession burst, RUNTIME=%s (%s): %d sessions of %d containers (%g cpu, %dMiB each; busybox rootfs) in one bsub --count, %d nodes of %g cpus (%d used), their run_dir on %s\n",
			mode, mode.what(), sessions, size, cpu, memMiB, nodes, nodeCPU, len(used), runDir)
		fmt.Fprintf(w, "  per session, submit →                 p50 ms   p90 ms   p99 ms   max ms  count\n")
		for _, r := range []struct {
			name string
			v    []float64
		}{{"main1's first output", mainOut}, {"every container's first output", allOut}, {"all running (schedd's started)", running}} {
			q := quantiles(r.v)
			fmt.Fprintf(w, "  %-34s %8.1f %8.1f %8.1f %8.1f %6d\n", r.name, 1000*q[0], 1000*q[1], 1000*q[2], 1000*q[3], len(r.v))
		}
		if missing > 0 {
			fmt.Fprintf(w, "  %d containers printed nothing\n", missing)
		}
		fmt.Fprintf(w, "  stage (troupe_job_stage_seconds)      p50 ms   p90 ms  mean ms  count\n")
		for _, st := range []string{"queued", "dispatch", "preparing", "running", "ending"} {
			h := stageHist(m0, m1, st)
			fmt.Fprintf(w, "  %-34s %8.1f %8.1f %8.1f %6d\n", st, 1000*h.quantile(0.5), 1000*h.quantile(0.9), 1000*h.sum/math.Max(h.count, 1), int(h.count))
		}
		fmt.Fprintf(w, "  CPU ms per session                     start    whole\n")
		per := func(ticks uint64) float64 { return float64(ticks) * 10 / float64(sessions) } // USER_HZ 100
		for _, r := range []struct {
			name string
			of   func(cpuTicks) uint64
		}{
			{"schedd", func(t cpuTicks) uint64 { return t.schedd }},
			{mode.nodes(), func(t cpuTicks) uint64 { return t.nodelet }},
			{mode.reaped(), func(t cpuTicks) uint64 { return t.reaped }},
			{"rest of the machine", func(t cpuTicks) uint64 { return t.machine - min(t.machine, t.schedd+t.nodelet+t.reaped) }},
		} {
			fmt.Fprintf(w, "  %-34s %8.1f %8.1f\n", r.name, per(r.of(diff(cpuStart, cpu0))), per(r.of(diff(cpu1, cpu0))))
		}
		fmt.Fprintf(w, "  load average: %s before, %s once all printed\n", load0, load1)
		troupeAll := quantiles(allOut)
		for _, r := range raws {
			fmt.Fprintf(w, "  runc %s: the same %d containers at once, each by a `runc run --detach` (runc spec's namespaces: loopback only, no bridge or veth; read-only rootfs)\n", r.version, sessions*size)
			fmt.Fprintf(w, "  %-34s   p50 ms   p90 ms   p99 ms   max ms  count\n", fmt.Sprintf("per %d of them, launch →", size))
			for _, row := range []struct {
				name string
				v    []float64
			}{{"the first one's first output", r.mainOut}, {"every one's first output", r.allOut}} {
				q := quantiles(row.v)
				fmt.Fprintf(w, "  %-34s %8.1f %8.1f %8.1f %8.1f %6d\n", row.name, 1000*q[0], 1000*q[1], 1000*q[2], 1000*q[3], len(row.v))
			}
			fmt.Fprintf(w, "  troupe's every-container p99 / runc's: %.2f; the machine's CPU ms per %d until all printed: troupe %.1f, runc %.1f\n",
				troupeAll[2]/quantiles(r.allOut)[2], size, per(cpuStart.machine-cpu0.machine), per(r.ticks))
		}
		q := quantiles(mainOut)
		b.ReportMetric(1000*q[2], "p99-first-output-ms")
		b.ReportMetric(1000*quantiles(running)[2], "p99-all-running-ms")
		b.ReportMetric(1000*quantiles(allOut)[2], "p99-all-output-ms")
	}
}

// diff is b - a, field by field.
func diff(b, a cpuTicks) cpuTicks {
	return cpuTicks{b.schedd - a.schedd, b.nodelet - a.nodelet, b.reaped - a.reaped, b.machine - a.machine}
}

// waitPrinted waits until every file of paths holds a first line.
func waitPrinted(b *testing.B, paths []string, timeout time.Duration) {
	done := map[string]bool{}
	eventually.NoError(b, timeout, "every container's first output", func() error {
		for _, p := range paths {
			if !done[p] {
				if _, ok := firstOutput(p); ok {
					done[p] = true
				}
			}
		}
		if len(done) < len(paths) {
			return fmt.Errorf("%d of %d containers printed", len(done), len(paths))
		}
		return nil
	})
}

// waitAllRunning waits until schedd has each job of ids started (its
// containers all reported running).
func waitAllRunning(b *testing.B, cli *client.Client, ids []uint64, timeout time.Duration) {
	want := map[uint64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	eventually.NoError(b, timeout, "every session started", func() error {
		l, err := cli.Jobs(context.Background(), 0, 0)
		if err != nil {
			return err
		}
		started := 0
		for _, j := range l.Jobs {
			if want[j.ID] && !j.Started.IsZero() {
				started++
			}
		}
		if started < len(ids) {
			return fmt.Errorf("%d of %d jobs started", started, len(ids))
		}
		return nil
	})
}

// envInt is the environment's whole number name, at least least; def
// when unset.
func envInt(b *testing.B, name string, def, least int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < least {
		b.Fatalf("%s=%q: want a whole number, %d or more", name, s, least)
	}
	return v
}

// firstOutput is the wall-clock time a container printed first: the
// first field of its output file's first line, in seconds since the
// epoch.
func firstOutput(path string) (time.Time, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return time.Time{}, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return time.Time{}, false
	}
	sec, frac := math.Modf(v)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

// quantiles are v's p50, p90, p99 (nearest rank) and maximum.
func quantiles(v []float64) [4]float64 {
	if len(v) == 0 {
		return [4]float64{}
	}
	s := slices.Sorted(slices.Values(v))
	at := func(q float64) float64 { return s[max(int(math.Ceil(q*float64(len(s))))-1, 0)] }
	return [4]float64{at(0.5), at(0.9), at(0.99), s[len(s)-1]}
}

// loadAvg is /proc/loadavg's three averages.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// sessionCPU is readCPU over several nodelets: their CPU and their
// reaped children's summed.
func sessionCPU(b *testing.B, schedd int, nodelets []int) cpuTicks {
	t := readCPU(b, schedd, nodelets[0])
	for _, n := range nodelets[1:] {
		k := procTicks(b, n)
		t.nodelet += k[0] + k[1]
		t.reaped += k[2] + k[3]
	}
	return t
}

// printSteps prints the median and p90 of each step of the containers'
// starts the nodelets logged with -v (msg="container started",
// took=… steps.NAME=…).
func printSteps(log string) {
	steps := map[string][]float64{}
	var order []string
	for line := range strings.SplitSeq(log, "\n") {
		if !strings.Contains(line, `msg="container started"`) {
			continue
		}
		for _, f := range strings.Fields(line) {
			k, v, ok := strings.Cut(f, "=")
			if !ok || (k != "took" && !strings.HasPrefix(k, "steps.")) {
				continue
			}
			d, err := time.ParseDuration(v)
			if err != nil {
				continue
			}
			k = strings.TrimPrefix(k, "steps.")
			if _, seen := steps[k]; !seen {
				order = append(order, k)
			}
			steps[k] = append(steps[k], d.Seconds())
		}
	}
	if len(order) == 0 {
		fmt.Println("  no container start steps in the nodelets' log")
		return
	}
	fmt.Printf("  container start step (nodelet -v)     p50 ms   p90 ms   p99 ms   max ms  count\n")
	for _, k := range order {
		q := quantiles(steps[k])
		fmt.Printf("  %-34s %8.1f %8.1f %8.1f %8.1f %6d\n", k, 1000*q[0], 1000*q[1], 1000*q[2], 1000*q[3], len(steps[k]))
	}
}

// runcBurst is the runtime's own figure for the same burst: n
// containers of command started at once, each by a `runc run -d` of the
// given runc (its own `runc spec`: new pid, network, ipc, uts and mount
// namespaces, the network one with loopback only, no bridge or veth)
// on rootfs read-only, with the benchmark's cpu quota and memory limit,
// each printing into a file of its own in out; runc's bundle and state
// are in dir. It answers each
// container's launch → first output in seconds, in launch order, and the
// machine's CPU ticks from the launch until every container printed;
// the containers are deleted before it returns.
func runcBurst(b *testing.B, dir, out, runc, rootfs, command string, n int, cpu float64, memMiB int) ([]float64, uint64) {
	bundle, state := runcBundle(b, dir, runc, rootfs, func(proc, linux map[string]any) {
		proc["args"] = []string{"sh", "-c", command}
		res, _ := linux["resources"].(map[string]any)
		if res == nil {
			res = map[string]any{}
			linux["resources"] = res
		}
		res["memory"] = map[string]any{"limit": memMiB << 20}
		res["cpu"] = map[string]any{"quota": int64(cpu * 100000), "period": 100000}
	})
	if err := os.MkdirAll(out, 0o755); err != nil {
		b.Fatal(err)
	}
	ids, outs := make([]string, n), make([]string, n)
	for k := range n {
		ids[k] = fmt.Sprintf("burst-%d-%d", os.Getpid(), k)
		outs[k] = filepath.Join(out, ids[k]+".out")
	}
	// Deferred, so that a failure deletes them too (b.Fatal exits
	// through the deferred calls).
	defer func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, id := range ids {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				_ = exec.Command(runc, "--root", state, "delete", "--force", id).Run()
			})
		}
		wg.Wait()
	}()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	cpu0 := machineTicks(b)
	began := time.Now()
	for k := range n {
		wg.Go(func() {
			stdout, err := os.Create(outs[k])
			if err != nil {
				errs <- err
				return
			}
			defer stdout.Close()
			stderr, err := os.Create(outs[k] + ".err")
			if err != nil {
				errs <- err
				return
			}
			defer stderr.Close()
			// Files, not pipes: the detached container keeps runc's
			// stdio, and a pipe would hold Wait until it exits.
			cmd := exec.Command(runc, "--root", state, "run", "--detach", "--bundle", bundle, ids[k])
			cmd.Stdout, cmd.Stderr = stdout, stderr
			if err := cmd.Run(); err != nil {
				msg, _ := os.ReadFile(outs[k] + ".err")
				errs <- fmt.Errorf("runc run %s: %v: %s", ids[k], err, msg)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	waitPrinted(b, outs, 10*time.Minute)
	cpu1 := machineTicks(b)
	firsts := make([]float64, n)
	for k, p := range outs {
		t, _ := firstOutput(p)
		firsts[k] = t.Sub(began).Seconds()
	}
	return firsts, cpu1 - cpu0
}

// sessionMode is what runs the benchmark's nodes (RUNTIME).
type sessionMode string

const (
	// sessionRunc: dev nodelets starting runc containers, the whole
	// path (the default).
	sessionRunc sessionMode = "runc"
	// sessionFake: the same dev nodelets with the fake OCI runtime
	// (nodelet.hcl's oci_runtime = "fake"): every step of troupe's
	// (schedd, the nodelet's session network, files, keys, bundle and
	// overlay, its reports), no container.
	sessionFake sessionMode = "fake"
	// sessionNodesim: troupe-nodesim's simulated nodes (--first-output):
	// schedd's share alone.
	sessionNodesim sessionMode = "nodesim"
)

// errSessionRuntime: RUNTIME names no mode of the session burst.
var errSessionRuntime = errors.New("want runc (the default: dev nodelets, runc containers), fake (dev nodelets, the fake OCI runtime: no container) or nodesim (troupe-nodesim's simulated nodes)")

// sessionRuntime is the mode RUNTIME names ("" for runc); OCI_RUNTIME,
// the nodelets' OCI runtime, goes with runc only.
func sessionRuntime(runtime, oci string) (sessionMode, error) {
	m := sessionMode(runtime)
	switch m {
	case "":
		m = sessionRunc
	case sessionRunc, sessionFake, sessionNodesim:
	default:
		return "", fmt.Errorf("RUNTIME=%q: %w", runtime, errSessionRuntime)
	}
	if oci != "" && m != sessionRunc {
		return "", fmt.Errorf("RUNTIME=%s with OCI_RUNTIME=%s: OCI_RUNTIME picks the OCI runtime of RUNTIME=runc's nodelets; unset it", m, oci)
	}
	return m, nil
}

// what says what runs the containers in mode m.
func (m sessionMode) what() string {
	switch m {
	case sessionFake:
		return "dev nodelets with the fake OCI runtime: troupe's whole share, no container runs; first output = the wall clock where runc would start it"
	case sessionNodesim:
		return "troupe-nodesim's simulated nodes: schedd's share only; first output = the wall clock as a simulated container starts running"
	}
	return "dev nodelets, runc containers"
}

// nodes and reaped name the processes that run the nodes in mode m, and
// what they reaped, in the CPU table.
func (m sessionMode) nodes() string {
	if m == sessionNodesim {
		return "troupe-nodesim"
	}
	return "nodelets"
}

func (m sessionMode) reaped() string {
	if m == sessionNodesim {
		return "troupe-nodesim's reaped children"
	}
	return "nodelets' reaped children"
}

// startNodesim starts troupe-nodesim against schedd at addr with n
// nodes of cpu cores and memory each, whose containers "run" an hour
// and write their first output (--first-output), waits until every node
// has registered, and answers its pid; it is stopped when the benchmark
// ends. It is built into bin first when bin lacks it (go test's own
// binaries).
func startNodesim(b *testing.B, addr string, n int, cpu float64, memory string) int {
	b.Helper()
	sim := filepath.Join(bin, "troupe-nodesim")
	if _, err := os.Stat(sim); err != nil {
		cmd := exec.Command("go", "build", "-o", bin+"/", "../cmd/troupe-nodesim")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("building troupe-nodesim: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(sim, "--addr", addr, "--nodes", strconv.Itoa(n), "--cpu", strconv.FormatFloat(cpu, 'f', -1, 64),
		"--memory", memory, "--duration", "1h", "--first-output")
	var log bytes.Buffer
	cmd.Stderr = &log
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	registered := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "nodes registered") {
				close(registered)
			}
		}
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-registered:
	case <-done:
		b.Fatalf("troupe-nodesim exited:\n%s", log.String())
	case <-time.After(60 * time.Second):
		b.Fatalf("troupe-nodesim's %d nodes did not register in 60s:\n%s", n, log.String())
	}
	return cmd.Process.Pid
}

// TestSessionRuntime: the session burst's RUNTIME names its mode, runc
// when unset; anything else, or OCI_RUNTIME beside a mode that has no
// OCI runtime to pick, is refused saying what it takes.
func TestSessionRuntime(t *testing.T) {
	for _, c := range []struct {
		runtime, oci string
		want         sessionMode
		err          string
	}{
		{"", "", sessionRunc, ""},
		{"runc", "crun", sessionRunc, ""},
		{"fake", "", sessionFake, ""},
		{"nodesim", "", sessionNodesim, ""},
		{"crun", "", "", `RUNTIME="crun": want runc (the default: dev nodelets, runc containers), fake (`},
		{"fake", "runc", "", "RUNTIME=fake with OCI_RUNTIME=runc: OCI_RUNTIME picks the OCI runtime of RUNTIME=runc's nodelets; unset it"},
	} {
		got, err := sessionRuntime(c.runtime, c.oci)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("RUNTIME=%q OCI_RUNTIME=%q: %q, %v; want %q", c.runtime, c.oci, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("RUNTIME=%q OCI_RUNTIME=%q: error %v, want one saying %q", c.runtime, c.oci, err, c.err)
		}
	}
	if _, err := sessionRuntime("docker", ""); !errors.Is(err, errSessionRuntime) {
		t.Errorf("RUNTIME=docker: %v, want errSessionRuntime", err)
	}
}
