package main

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/accounting"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/fdlimit"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's
// times: 100 on every Linux architecture Go builds for.
const clockTicks = 100

// envInt reads a positive number from the environment, else def.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("$%s=%q: want a number", name, v)
	}
	return n
}

// proc reads a process's CPU time so far and its resident and peak
// resident memory, from /proc.
type proc struct{ pid int }

func (p proc) cpu(b *testing.B) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name, field 2, may hold spaces: count after its ')'.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// mem returns VmRSS and VmHWM in bytes.
func (p proc) mem(b *testing.B) (rss, peak int64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// files counts the process's open files (its connections among them).
func (p proc) files() int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

// startProc starts bin with args, its stderr to log, and sends each line
// of its stdout to lines; it is killed when the benchmark ends.
func startProc(b *testing.B, log *os.File, bin string, args ...string) (*exec.Cmd, <-chan string) {
	cmd := exec.Command(bin, args...)
	// A benchmark stopped by a signal (timeout(1)) runs no cleanup: its
	// schedd and troupe-nodesim must not outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = log
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd, lines
}

// waitLine waits up to limit for a line of lines starting with prefix
// and returns the rest of it.
func waitLine(b *testing.B, lines <-chan string, prefix string, limit time.Duration) string {
	deadline := time.After(limit)
	for {
		select {
		case l := <-lines:
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return rest
			}
		case <-deadline:
			b.Fatalf("no %q line within %s", prefix, limit)
		}
	}
}

// phase is what one throughput run measured.
type phase struct {
	jobs, containers, completed int
	overall, steady             float64 // jobs/s
	steadyContainers            float64 // containers/s, over the same ends
	p50, p99                    time.Duration
	cpu, simCPU                 float64 // schedd's and troupe-nodesim's cores busy
	unfinished                  int
	files                       int // the most open files schedd had at a look (each poll)
	// others counts the jobs that ended otherwise, by state and the
	// start of their reason ("FAILED main1: killed by the node's fence").
	others map[string]int
}

// retry calls f until it succeeds or deadline passes: schedd saturated
// by thousands of nodes refuses connections for a while (its listen
// backlog full), which is a figure to report, not a reason to stop. A
// submission keeps its request id across tries, so it makes one job.
func retry(b *testing.B, deadline time.Time, what string, f func() error) bool {
	for {
		err := f()
		if err == nil {
			return true
		}
		if time.Now().After(deadline) {
			b.Errorf("%s: gave up at the deadline: %v", what, err)
			return false
		}
		time.Sleep(time.Second)
	}
}

// runPhase submits reqs from 32 submitters at once, waits for every job
// to end (at most limit), and measures from schedd's own times: overall
// jobs/s is jobs over first submission to last end, steady jobs/s the
// middle 80% of the ends over the time they took.
func runPhase(b *testing.B, c *client.Client, schedd, sim proc, reqs []api.SubmitRequest, limit time.Duration) phase {
	ctx := context.Background()
	cpu0, simCPU0, t0 := schedd.cpu(b), sim.cpu(b), time.Now()
	deadline := t0.Add(limit)
	ids := make([]uint64, len(reqs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req := reqs[i]
				req.RequestID = fmt.Sprintf("bench-scale-%d-%s", t0.UnixNano(), req.Spec.Name)
				retry(b, deadline, "submit", func() error {
					res, err := c.Submit(ctx, req)
					ids[i] = res.JobID
					return err
				})
			}
		}()
	}
	for i := range reqs {
		next <- i
	}
	close(next)
	wg.Wait()
	want := map[uint64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	ph := phase{jobs: len(reqs), others: map[string]int{}}
	for {
		var l api.JobList
		if !retry(b, deadline, "listing the jobs", func() (err error) {
			l, err = c.JobsWhere(ctx, url.Values{"ended": {"false"}, "partition": {"default"}}, 0, 0)
			return err
		}) {
			break
		}
		ph.files = max(ph.files, schedd.files())
		ph.unfinished = 0
		for _, j := range l.Jobs {
			if want[j.ID] {
				ph.unfinished++
			}
		}
		if ph.unfinished == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	ph.cpu = (schedd.cpu(b) - cpu0).Seconds() / time.Since(t0).Seconds()
	ph.simCPU = (sim.cpu(b) - simCPU0).Seconds() / time.Since(t0).Seconds()
	var all api.JobList
	if !retry(b, time.Now().Add(5*time.Minute), "listing the ended jobs", func() (err error) {
		all, err = c.JobsWhere(ctx, url.Values{"partition": {"default"}}, 0, 0)
		return err
	}) {
		return ph
	}
	var first time.Time
	type end struct {
		at   time.Time
		size int
	}
	var ends []end
	var lat []time.Duration
	for _, j := range all.Jobs {
		if !want[j.ID] || !j.State.Terminal() {
			continue
		}
		ph.containers += len(j.Containers)
		if j.State != api.JobCompleted {
			why := j.Reason
			if _, after, ok := strings.Cut(why, ": "); ok {
				why = after // the host it happened on varies
			}
			ph.others[string(j.State)+" "+why[:min(len(why), 40)]]++
			continue
		}
		ph.completed++
		if first.IsZero() || j.Submitted.Before(first) {
			first = j.Submitted
		}
		ends = append(ends, end{j.Ended, len(j.Containers)})
		lat = append(lat, j.Ended.Sub(j.Submitted))
	}
	if len(ends) < 2 {
		return ph
	}
	slices.SortFunc(ends, func(a, b end) int { return a.at.Compare(b.at) })
	slices.Sort(lat)
	ph.overall = float64(len(ends)) / ends[len(ends)-1].at.Sub(first).Seconds()
	lo, hi := len(ends)/10, len(ends)*9/10
	if hi > lo && ends[hi].at.After(ends[lo].at) {
		span := ends[hi].at.Sub(ends[lo].at).Seconds()
		containers := 0
		for _, e := range ends[lo+1 : hi+1] {
			containers += e.size
		}
		ph.steady, ph.steadyContainers = float64(hi-lo)/span, float64(containers)/span
	}
	ph.p50, ph.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	return ph
}

// fillHistory puts n synthetic ended jobs (50 users, 10 accounts, 4
// partitions, ending over the past year) into the SQLite accounting store
// at path, where schedd keeps it by default, 10,000 to a transaction.
// Their ids start at 1<<40, clear of the jobs the benchmark submits:
// the store skips a record whose id it holds already.
func fillHistory(b *testing.B, path string, n int) time.Duration {
	ctx := context.Background()
	began := time.Now()
	s, err := accounting.OpenSQLite(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	states := []api.JobState{api.JobCompleted, api.JobCompleted, api.JobCompleted, api.JobFailed, api.JobCancelled, api.JobTimeout}
	start := began.Add(-365 * 24 * time.Hour)
	step := 365 * 24 * time.Hour / time.Duration(max(n, 1))
	const batch = 10000
	for i := 0; i < n; i += batch {
		recs := make([]api.HistoryJob, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			ended := start.Add(time.Duration(j) * step)
			node := fmt.Sprintf("n%d", j%1000)
			recs = append(recs, api.HistoryJob{ID: 1<<40 + uint64(j), User: fmt.Sprintf("user%02d", j%50), Account: fmt.Sprintf("acct%d", j%10),
				Partition: []string{"cpu", "gpu", "big", "debug"}[j%4], State: states[j%len(states)],
				Submitted: ended.Add(-3 * time.Minute), Started: ended.Add(-2 * time.Minute), Ended: ended,
				Wait: time.Minute, Run: 2 * time.Minute, CPUTime: 90 * time.Second, Nodes: []string{node},
				Containers: []api.HistoryContainer{{Host: "main1", Node: node, State: api.ContainerExited}}})
		}
		if _, err := s.Put(ctx, recs); err != nil {
			b.Fatalf("filling the accounting store: %v", err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return time.Since(began)
}

// oneSecondJobs are n jobs of size containers each (sizes cycling
// through sizes), every container running 1 s.
func oneSecondJobs(prefix string, n int, sizes ...int) []api.SubmitRequest {
	var out []api.SubmitRequest
	for i := range n {
		out = append(out, simJob(fmt.Sprintf("%s-%d", prefix, i), sizes[i%len(sizes)], time.Second, 0))
	}
	return out
}

// BenchmarkScale is `make bench-scale`: a real schedd (its own process,
// built from this tree, or $BENCH_BIN's) and troupe-nodesim with $NODES
// simulated nodes (default 10,000; 4 cores and 16 GiB each) on this
// machine. It prints the time all nodes take to register, schedd's CPU
// and memory while they only heartbeat, and the sustained end-to-end
// throughput (submit to COMPLETED, from schedd's own timestamps) of
// $BENCH_JOBS one-container jobs (default 2,000) and of $BENCH_GANGS
// gangs of 8, 16, 32 and 64 containers (default 200), every container
// running 1 s.
//
// $PEERS (default 1) schedd peers: with 3, a raft cluster over https,
// the nodes and the submitters given the list of all three (a follower
// sends them to the leader); the followers' memory is printed too.
// $BENCH_HISTORY (default 0) synthetic ended jobs are put in schedd's
// accounting store before it starts, to show whether a long history
// slows it (throughput, bqueue's latency, memory). $BENCH_QUEUED
// (default 0) jobs wait for Resources behind a full node of their own
// partition before the throughput runs (a backlog): schedd's memory, its
// scheduling passes and bqueue's latency are printed with it.
// b.N is ignored: one run is minutes long.
func BenchmarkScale(b *testing.B) {
	nodes := envInt(b, "NODES", 10000)
	jobs := envInt(b, "BENCH_JOBS", 2000)
	gangs := envInt(b, "BENCH_GANGS", 200)
	idle := time.Duration(envInt(b, "BENCH_IDLE_SECONDS", 10)) * time.Second
	limit := time.Duration(envInt(b, "BENCH_PHASE_MINUTES", 10)) * time.Minute
	history := envInt(b, "BENCH_HISTORY", 0)
	queued := envInt(b, "BENCH_QUEUED", 0)
	npeers := envInt(b, "PEERS", 1)
	if npeers < 1 || npeers%2 == 0 {
		b.Fatalf("$PEERS=%d: want an odd number of schedd peers (1, 3, 5)", npeers)
	}

	// schedd and troupe-nodesim each need a file per node and more; the
	// limit raised here is the one they start with.
	soft, hard, err := fdlimit.Raise()
	if err != nil {
		b.Fatalf("raising the limit of open files (%d) to the hard limit (%d): %v", soft, hard, err)
	}
	if soft < uint64(nodes)+1024 {
		b.Fatalf("NODES=%d needs a connection per node in schedd and in troupe-nodesim, but open files are limited to %d (ulimit -Hn): raise it or lower NODES", nodes, soft)
	} else if soft < 3*uint64(nodes) {
		fmt.Printf("warning: open files are limited to %d (ulimit -Hn); a busy node holds up to 3 connections, so NODES=%d may run out\n", soft, nodes)
	}
	dir := b.TempDir()
	bin := benchBinaries(b, dir)
	log := benchLog(b, dir)
	// Each figure is printed as soon as it is measured: a run that fails
	// later keeps what it had.
	row := func(name, format string, args ...any) {
		fmt.Printf("%-44s %s\n", name, fmt.Sprintf(format, args...))
	}
	mib := func(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
	what := "schedd"
	if npeers > 1 {
		what = fmt.Sprintf("%d schedd raft peers over https", npeers)
	}
	fmt.Printf("\ntroupe scale benchmark: %s + troupe-nodesim, %d nodes of 4 cores / 16 GiB, on %d CPUs\n", what, nodes, runtime.NumCPU())
	row("load average (1 5 15 min) at start", "%s", loadavg())
	row("open files limit", "%d (hard %d)", soft, hard)
	store := ""
	if history > 0 {
		store = filepath.Join(dir, "history.db")
		took := fillHistory(b, store, history)
		row("ended jobs in the store", "%d (inserted in %.1f s)", history, took.Seconds())
	} else {
		row("ended jobs in the store", "0")
	}
	args := []string{"--keep-ended", "1h", "--max-queued-per-user", "0", "--max-queued-input-per-user", "0"}
	if queued > 0 {
		parts := filepath.Join(dir, "partitions.hcl")
		if err := os.WriteFile(parts, []byte(backlogPartitions), 0o600); err != nil {
			b.Fatal(err)
		}
		args = append(args, "--partitions", parts)
	}
	cl := startCluster(b, log, bin, dir, npeers, store, args...)
	c := cl.client
	lead := cl.leader()
	if lead < 0 {
		b.Fatal("no schedd says it leads")
	}
	schedd := cl.peers[lead].proc
	if npeers > 1 {
		row("leader", "%s", cl.peers[lead].name)
	}
	followers := func(label string) {
		for i, p := range cl.peers {
			if i != lead {
				rss, peak := p.mem(b)
				row(fmt.Sprintf("follower %s RSS, %s / peak", p.name, label), "%s / %s", mib(rss), mib(peak))
			}
		}
	}
	b.ResetTimer()

	ncmd, nlines := startProc(b, log, filepath.Join(bin, "troupe-nodesim"), append(cl.simArgs, "--nodes", strconv.Itoa(nodes),
		"--cpu", "4", "--memory", "16GiB")...)
	reg := waitLine(b, nlines, fmt.Sprintf("troupe-nodesim: %d nodes registered in ", nodes), 30*time.Minute)
	regTime, err := time.ParseDuration(reg)
	if err != nil {
		b.Fatalf("registration time %q: %v", reg, err)
	}
	row("registration of all nodes", "%s (%.0f nodes/s)", regTime.Round(time.Millisecond), float64(nodes)/regTime.Seconds())
	sim := proc{ncmd.Process.Pid}
	// Let the first heartbeats (spread over one interval) pass.
	time.Sleep(5 * time.Second)
	measureIdle := func(label string) (cores float64, rss int64) {
		cpu0, simCPU0, t0 := schedd.cpu(b), sim.cpu(b), time.Now()
		n0, d0 := cl.passes(b, lead)
		time.Sleep(idle)
		cores = (schedd.cpu(b) - cpu0).Seconds() / time.Since(t0).Seconds()
		simCores := (sim.cpu(b) - simCPU0).Seconds() / time.Since(t0).Seconds()
		n1, d1 := cl.passes(b, lead)
		rss, _ = schedd.mem(b)
		row("schedd CPU, "+label, "%.3f cores (over %s; troupe-nodesim %.3f)", cores, idle, simCores)
		if n1 > n0 {
			row("  scheduling passes meanwhile", "%d, mean %s (snapshot to plan)", n1-n0, ((d1 - d0) / time.Duration(n1-n0)).Round(time.Microsecond))
		}
		inuse, live := cl.heap(b, lead)
		row("schedd RSS, "+label, "%s (Go heap %s in use, %s live at the last GC)", mib(rss), mib(inuse), mib(live))
		row("schedd open files, "+label, "%d", schedd.files())
		return cores, rss
	}
	idleCPU, idleRSS := measureIdle("idle, nodes heartbeating")
	if npeers > 1 {
		followers("idle")
	}
	upDown := func() string {
		var l api.NodeList
		if !retry(b, time.Now().Add(2*time.Minute), "listing the nodes", func() (err error) {
			l, err = c.Nodes(context.Background())
			return err
		}) {
			return "?"
		}
		down := 0
		for _, n := range l.Nodes {
			if n.State == api.NodeDown {
				down++
			}
		}
		return fmt.Sprintf("%d UP, %d DOWN", len(l.Nodes)-down, down)
	}
	row("nodes after idle", "%s", upDown())
	idleList, _ := queryLatency(b, c, listQueries[0].q, 20)
	row("bqueue -u all (GET /v1/jobs?ended=false)", "p50 %s over 20, idle", idleList.Round(time.Microsecond))

	if queued > 0 {
		bcmd, blines := startProc(b, log, filepath.Join(bin, "troupe-nodesim"), append(cl.simArgs, "--nodes", "1", "--prefix", "backlog",
			"--cpu", "4", "--memory", "16GiB")...)
		waitLine(b, blines, "troupe-nodesim: 1 nodes registered in ", 5*time.Minute)
		_ = bcmd
		blockBacklog(b, c)
		took := submitBacklog(b, c, queued)
		row("backlog submitted (POST /v1/jobs/batch)", "%d jobs in %.1f s (%.0f jobs/s), waiting for Resources", queued, took.Seconds(), float64(queued)/took.Seconds())
		l, err := c.JobsWhere(context.Background(), url.Values{"state": {string(api.JobPending)}, "partition": {"backlog"}, "limit": {"1"}}, 0, 0)
		if err != nil || len(l.Jobs) == 0 {
			b.Fatalf("no pending job in partition backlog after submitting %d: %v", queued, err)
		}
		row("  a backlog job's pending reason", "%s", l.Jobs[0].Reason)
		time.Sleep(5 * time.Second) // a pass or two over the backlog
		idleCPU, idleRSS = measureIdle(fmt.Sprintf("idle with %d queued", queued))
		if npeers > 1 {
			followers(fmt.Sprintf("%d queued", queued))
		}
		// A pass is run on every state change: submit one more job of
		// the backlog every 200 ms, each a pass over all of it.
		n0, d0 := cl.passes(b, lead)
		cpu0, t0 := schedd.cpu(b), time.Now()
		for i := range 25 {
			if _, err := c.Submit(context.Background(), backlogJob(fmt.Sprintf("backlog-more-%d", i), 1, time.Second)); err != nil {
				b.Fatalf("submitting one more backlog job: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(time.Second)
		cores := (schedd.cpu(b) - cpu0).Seconds() / time.Since(t0).Seconds()
		n1, d1 := cl.passes(b, lead)
		if n1 > n0 {
			row("scheduling pass over the backlog", "%d passes for 25 submissions, mean %s (snapshot to plan); schedd %.2f cores meanwhile (%.2f idle)",
				n1-n0, ((d1 - d0) / time.Duration(n1-n0)).Round(time.Microsecond), cores, idleCPU)
			row("  schedd CPU per pass, idle's taken off", "%s", (time.Duration((cores-idleCPU)*float64(time.Since(t0))) / time.Duration(n1-n0)).Round(time.Microsecond))
		} else {
			row("scheduling pass over the backlog", "no pass in %s: schedd's metrics did not count one", time.Since(t0).Round(time.Second))
		}
		for _, q := range listQueries {
			n := 20
			if q.q.Get("limit") == "" && q.q.Get("partition") == "" && q.q.Get("state") == "" {
				n = 5 // the whole backlog, seconds each
			}
			p50, got := queryLatency(b, c, q.q, n)
			row("  "+q.label, "p50 %s over %d (%d jobs each; GET /v1/jobs?%s)", p50.Round(time.Microsecond), n, got, q.q.Encode())
		}
	}

	var one, gang phase
	for _, p := range []struct {
		name  string
		n     int
		ph    *phase
		sizes []int
	}{{"1-container jobs, 1 s each", jobs, &one, []int{1}}, {"gangs of 8-64 containers, 1 s each", gangs, &gang, []int{8, 16, 32, 64}}} {
		if p.n == 0 {
			continue
		}
		*p.ph = runPhase(b, c, schedd, sim, oneSecondJobs(strings.Fields(p.name)[0], p.n, p.sizes...), limit)
		ph := *p.ph
		row(p.name, "%d jobs, %d containers: %d COMPLETED, %d unfinished", ph.jobs, ph.containers, ph.completed, ph.unfinished)
		for why, n := range ph.others {
			row("  ended otherwise", "%d %s", n, why)
		}
		row("  throughput (submit to COMPLETED)", "%.1f jobs/s overall, %.1f jobs/s (%.0f containers/s) steady (middle 80%% of ends)",
			ph.overall, ph.steady, ph.steadyContainers)
		row("  submit to COMPLETED", "p50 %s, p99 %s", ph.p50.Round(time.Millisecond), ph.p99.Round(time.Millisecond))
		row("  schedd CPU meanwhile", "%.2f cores (troupe-nodesim %.2f)", ph.cpu, ph.simCPU)
		row("  schedd open files, most seen", "%d", ph.files)
		row("  nodes after", "%s", upDown())
	}
	_, peakRSS := schedd.mem(b)
	b.StopTimer()
	inuse, live := cl.heap(b, lead)
	row("schedd RSS, peak", "%s (Go heap at the end %s in use, %s live at the last GC)", mib(peakRSS), mib(inuse), mib(live))
	if npeers > 1 {
		followers("end")
		if now := cl.leader(); now != lead {
			who := "none"
			if now >= 0 {
				who = cl.peers[now].name
			}
			row("leader at the end", "%s (leadership moved during the run: the figures above are the first leader's)", who)
		} else {
			row("leader at the end", "%s (unchanged)", cl.peers[lead].name)
		}
	}
	row("load average (1 5 15 min) at end", "%s", loadavg())
	b.ReportMetric(regTime.Seconds(), "register-s")
	b.ReportMetric(idleCPU, "idle-cores")
	b.ReportMetric(float64(idleRSS)/(1<<20), "idle-MiB")
	b.ReportMetric(one.steady, "jobs/s")
	b.ReportMetric(gang.steady, "gangs/s")
	b.ReportMetric(float64(idleList.Microseconds())/1000, "bqueue-ms")
	b.ReportMetric(float64(peakRSS)/(1<<20), "peak-MiB")
}

// benchLog is the log file in dir that a benchmark's schedd and
// troupe-nodesim write to; a failed run shows its last 4 KiB.
func benchLog(b *testing.B, dir string) *os.File {
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if b.Failed() {
			out, _ := os.ReadFile(log.Name())
			b.Logf("schedd and troupe-nodesim log (last 4 KiB):\n%s", out[max(0, len(out)-4096):])
		}
		log.Close()
	})
	return log
}
