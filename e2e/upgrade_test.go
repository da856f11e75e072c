package e2e

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/freeport"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/sched/state"
)

// previousRelease is the commit the rolling-upgrade test upgrades from:
// the release before this tree (TROUPE_UPGRADE_FROM names another).
const previousRelease = "489b1b3"

// buildRelease builds schedd, the nodelet and the tools the nodelet puts
// in containers of commit into a temporary directory, from `git archive`
// of this clone's history, as `make build` builds them.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	for _, tool := range []string{"git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP: the rolling-upgrade test builds the previous release from git history and needs %s", tool)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("SKIP: the previous release, commit %s, is not in this clone's history (a shallow clone? `git fetch --unshallow`): %v %s", commit, err, out)
	}
	src, out := t.TempDir(), t.TempDir()
	if b, err := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src).CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v: %s", commit, err, b)
	}
	for _, b := range []struct {
		cgo  string
		args []string
	}{
		{"0", []string{"build", "-o", out + "/", "./cmd/schedd", "./cmd/troupe-init", "./cmd/troupe-ssh", "./cmd/troupe-fence"}},
		{"1", []string{"build", "-tags", nodeletTags(), "-o", out + "/", "./cmd/nodelet"}},
	} {
		cmd := exec.Command("go", b.args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+b.cgo)
		if o, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s of %s: %v: %s", b.args[len(b.args)-1], commit, err, o)
		}
	}
	return out
}

// upPeer is one schedd raft peer of the upgrade test: its flags stay,
// its binary changes.
type upPeer struct {
	id, api, metrics, dir, sock string
	args                        []string
	cmd                         *exec.Cmd
	done                        chan struct{}
	bin                         string
}

func (p *upPeer) start(t *testing.T, bin string) {
	t.Helper()
	p.bin = bin
	logf, err := os.OpenFile(filepath.Join(p.dir+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== %s starts %s\n", p.id, bin)
	p.cmd = exec.Command(bin+"/schedd", append([]string{"--data-dir", p.dir, "--socket", p.sock, "--metrics-addr", p.metrics}, p.args...)...)
	p.cmd.Stderr = logf
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func() { _ = p.cmd.Wait(); logf.Close(); close(p.done) }()
	select {
	case <-scanAddr(out):
	case <-p.done:
		t.Fatalf("peer %s (%s) exited at start:\n%s", p.id, bin, tail(p.dir+".log", 30))
	case <-time.After(60 * time.Second):
		t.Fatalf("peer %s did not start in 60s", p.id)
	}
}

// stop stops the peer with SIGTERM, as a site's service manager does.
func (p *upPeer) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("peer %s did not stop in 20s of SIGTERM", p.id)
	}
}

func (p *upPeer) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// metric reads one unlabelled gauge of the peer (-1: none or no answer).
func (p *upPeer) metric(name string) float64 {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// upNodelet is one nodelet of the upgrade test, runc containers on the
// host's network.
type upNodelet struct {
	name string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func (n *upNodelet) start(t *testing.T, bin string) {
	t.Helper()
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== %s starts %s\n", n.name, bin)
	n.cmd = exec.Command(bin+"/nodelet", n.args...)
	n.cmd.Env = append(os.Environ(), "TROUPE_TOKEN=", "TROUPE_CA=")
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.done = make(chan struct{})
	go func() { _ = n.cmd.Wait(); logf.Close(); close(n.done) }()
}

// signal sends sig and waits for the nodelet to exit.
func (n *upNodelet) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	_ = n.cmd.Process.Signal(sig)
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
		t.Fatalf("nodelet %s did not exit in 30s of %v", n.name, sig)
	}
}

// TestRollingUpgrade: a three-peer cluster of the previous release with
// two runc nodelets running jobs is upgraded to this tree one process at
// a time while a client submits and reads: a follower; then, the other
// follower frozen so that the upgraded peer must win the election, the
// leader (a leader of this release with a follower of the previous one,
// which must read what it writes); then the last follower; then each
// nodelet, stopped with SIGQUIT and its containers re-attached by the
// new one. No peer stops, every submit is acknowledged and readable,
// the running jobs are never stopped or started again and end COMPLETED
// once released, every other job runs once, and once every peer runs
// this release the state moves to its schema.
func TestRollingUpgrade(t *testing.T) {
	needRunc(t)
	from := cmp.Or(os.Getenv("TROUPE_UPGRADE_FROM"), previousRelease)
	began := time.Now()
	old := buildRelease(t, from)
	t.Logf("built the previous release (%s) in %v", from, time.Since(began).Round(time.Second))
	began = time.Now()

	dir := searchable(t)
	cert, key, err := auth.SelfSigned(filepath.Join(dir, "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	join := filepath.Join(dir, "join-token")
	if _, err := auth.JoinToken(join); err != nil {
		t.Fatal(err)
	}
	const n = 3
	peers := make([]*upPeer, n)
	var rafts, urls []string
	for i := range n {
		peers[i] = &upPeer{id: fmt.Sprint("s", i+1), api: freeport.Addr(t), metrics: freeport.Addr(t), dir: filepath.Join(dir, fmt.Sprint("s", i+1))}
		peers[i].sock = filepath.Join(peers[i].dir, "schedd.sock")
		rafts = append(rafts, fmt.Sprintf("s%d=%s", i+1, freeport.Addr(t)))
		urls = append(urls, "https://"+peers[i].api)
	}
	for i, p := range peers {
		p.args = []string{"--listen", p.api, "--tls-cert", cert, "--tls-key", key, "--join-token-file", join,
			"--raft-addr", strings.SplitN(rafts[i], "=", 2)[1], "--peers", strings.Join(rafts, ","), "--node-timeout", "30s"}
		p.start(t, old)
	}
	t.Cleanup(func() {
		for _, p := range peers {
			if p.alive() {
				_ = p.cmd.Process.Signal(syscall.SIGCONT) // one the test froze
				_ = p.cmd.Process.Signal(syscall.SIGTERM)
				<-p.done
			}
		}
		if t.Failed() {
			for _, p := range peers {
				t.Logf("peer %s log (last lines):\n%s", p.id, tail(p.dir+".log", 25))
			}
		}
	})
	leader := func(within time.Duration) int {
		t.Helper()
		return eventually.Value(t, within, "a live leader among the peers", func() (int, bool) {
			for i, p := range peers {
				if p.alive() && p.metric("troupe_schedd_raft_is_leader") == 1 {
					return i, true
				}
			}
			return -1, false
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	l := leader(30 * time.Second)
	sc, err := client.New(peers[l].sock)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := sc.CreateToken(ctx, api.TokenCreate{User: "root", Admin: true})
	if err != nil {
		t.Fatalf("admin token from the leader's socket: %v", err)
	}
	cli, err := client.NewWith(strings.Join(urls, ","), client.Options{CA: cert, Token: tok.Secret})
	if err != nil {
		t.Fatal(err)
	}

	work := filepath.Join(dir, "work") // the jobs' submit directory: writable in image host
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	nodelets := make([]*upNodelet, 2)
	for i := range nodelets {
		name := fmt.Sprint("up-n", i+1)
		nodelets[i] = &upNodelet{name: name, log: filepath.Join(dir, name+".log"), args: []string{"--addr", strings.Join(urls, ","),
			"--ca", cert, "--join-token-file", join, "--name", name, "--state-dir", filepath.Join(dir, name),
			"--runtime", "runc", "--network", "host", "--cpu", "3", "--memory", "2GiB", "--heartbeat", "500ms", "--stop-grace", "2s"}}
		nodelets[i].start(t, old)
	}
	t.Cleanup(func() {
		for _, nl := range nodelets {
			select {
			case <-nl.done:
			default:
				nl.signal(t, syscall.SIGTERM)
			}
		}
		if t.Failed() {
			for _, nl := range nodelets {
				t.Logf("nodelet %s log (last lines):\n%s", nl.name, tail(nl.log, 25))
			}
		}
	})
	eventually.NoError(t, 60*time.Second, "every nodelet registered and UP", func() error {
		nl, err := cli.Nodes(ctx)
		up := 0
		for _, nd := range nl.Nodes {
			if nd.State == api.NodeUp {
				up++
			}
		}
		if err == nil && up == len(nodelets) {
			return nil
		}
		for _, nl := range nodelets {
			select {
			case <-nl.done:
				t.Fatalf("nodelet %s exited at start:\n%s", nl.name, tail(nl.log, 20))
			default:
			}
		}
		return fmt.Errorf("%d of %d UP (%v)", up, len(nodelets), err)
	})

	// The jobs note what they do in work, mounted at /home/work/up.
	spec := func(name, script string, cpu float64) jobspec.Job {
		return jobspec.Job{Name: name, Image: "host", Command: []string{"sh", "-c", script},
			Mounts: []jobspec.Mount{{Name: "up", Source: work, Target: "/home/work/up"}}, Output: "%j.out",
			Cluster: jobspec.Cluster{Size: 1, Mode: jobspec.ModeSingleNode}, Resources: jobspec.Resources{CPU: cpu, Memory: 32 << 20}}
	}
	// Long jobs, at least one on each node, run through the whole
	// upgrade: each notes its start, waits for the go file and notes its
	// end.
	starts, ends, ran, gofile := filepath.Join(work, "starts"), filepath.Join(work, "ends"), filepath.Join(work, "ran"), filepath.Join(work, "go")
	long := map[uint64]bool{}
	for i := range 4 {
		script := `echo "$LSB_JOBID" >> /home/work/up/starts; while [ ! -e /home/work/up/go ]; do sleep 0.2; done; echo "$LSB_JOBID" >> /home/work/up/ends`
		res, err := cli.Submit(ctx, api.SubmitRequest{Cwd: work, Spec: wire.ToAPI(spec(fmt.Sprint("long-", i), script, 1))})
		if err != nil {
			t.Fatal(err)
		}
		long[res.JobID] = true
	}
	started := map[uint64]time.Time{}
	for id := range long {
		eventually.NoError(t, 60*time.Second, fmt.Sprintf("long job %d RUNNING", id), func() error {
			j, _, err := cli.Job(ctx, id, 0, 0)
			if err == nil && j.State == api.JobRunning {
				started[id] = j.Started
				return nil
			}
			return fmt.Errorf("%s (%s) %v", j.State, j.Reason, err)
		})
	}
	lines := func(path string) map[string]int {
		b, _ := os.ReadFile(path)
		out := map[string]int{}
		for _, l := range strings.Fields(string(b)) {
			out[l]++
		}
		return out
	}
	eventually.Equal(t, 30*time.Second, "the starts the long jobs noted", len(long), func() int { return min(len(lines(starts)), len(long)) })
	// stillRunning: the long jobs are RUNNING as they started, none
	// started again.
	stillRunning := func(when string) {
		t.Helper()
		for id := range long {
			j, _, err := cli.Job(ctx, id, 0, 0)
			if err != nil || j.State != api.JobRunning || !j.Started.Equal(started[id]) {
				t.Fatalf("%s: long job %d is %s (%s), started %v (first %v), %v", when, id, j.State, j.Reason, j.Started, started[id], err)
			}
		}
		for id, k := range lines(starts) {
			if k != 1 {
				t.Fatalf("%s: long job %s started %d times", when, id, k)
			}
		}
	}
	t.Logf("cluster of the previous release up, 4 long jobs running, in %v", time.Since(began).Round(time.Second))

	// The client's load through the whole upgrade: a short job submitted
	// and read back every 300ms.
	var (
		mu       sync.Mutex
		acked    = map[uint64]bool{}
		problems []string
		stop     = make(chan struct{})
		loadDone = make(chan struct{})
	)
	go func() {
		defer close(loadDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			res, err := cli.Submit(cctx, api.SubmitRequest{Cwd: work, Spec: wire.ToAPI(spec(fmt.Sprint("short-", i), `echo "$LSB_JOBID" >> /home/work/up/ran`, 0.5))})
			if err == nil {
				mu.Lock()
				acked[res.JobID] = true
				mu.Unlock()
				// Read it back; a follower may not have applied it yet.
				if !eventually.Within(10*time.Second, func() bool {
					var j api.Job
					j, _, err = cli.Job(cctx, res.JobID, 0, 0)
					return err == nil && j.Name == fmt.Sprint("short-", i)
				}) {
					err = fmt.Errorf("reading job %d back for 10s: %w", res.JobID, err)
				}
			}
			cancel()
			if err != nil {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s: short-%d: %v", time.Now().Format("15:04:05.000"), i, err))
				mu.Unlock()
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-loadDone
	}()

	allAlive := func(when string) {
		t.Helper()
		for _, p := range peers {
			if !p.alive() {
				t.Fatalf("%s: peer %s (%s) stopped:\n%s", when, p.id, p.bin, tail(p.dir+".log", 20))
			}
		}
	}
	// applies: a job submitted now is read from peer p's own state (its
	// socket serves reads from it): p applies what the leader writes.
	applies := func(p *upPeer, name string) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := cli.Submit(sctx, api.SubmitRequest{Cwd: work, Spec: wire.ToAPI(spec(name, `echo "$LSB_JOBID" >> /home/work/up/ran`, 0.5))})
		cancel()
		if err != nil {
			allAlive("submit " + name)
			t.Fatalf("submit %s: %v", name, err)
		}
		mu.Lock()
		acked[res.JobID] = true
		mu.Unlock()
		pc, err := client.New(p.sock)
		if err != nil {
			t.Fatal(err)
		}
		eventually.True(t, 20*time.Second, fmt.Sprintf("peer %s (%s) applying job %d (%s)", p.id, p.bin, res.JobID, name), func() bool {
			j, _, err := pc.Job(ctx, res.JobID, 0, 0)
			return err == nil && j.Name == name
		})
	}
	upgrade := func(p *upPeer) {
		t.Helper()
		p.stop(t)
		p.start(t, bin)
		applies(p, "after-"+p.id)
		allAlive("after upgrading " + p.id)
		t.Logf("peer %s upgraded, %s leads, at %v", p.id, peers[leader(10*time.Second)].id, time.Since(began).Round(time.Second))
	}

	// 1. A follower.
	l = leader(10 * time.Second)
	a := peers[(l+1)%n]
	upgrade(a)
	// 2. The leader, with the other follower of the previous release
	// frozen meanwhile: its log falls behind, so the upgraded peer wins
	// the election and leads a follower of the previous release, which
	// must read what it writes.
	var last *upPeer
	if l = leader(10 * time.Second); peers[l] == a {
		t.Logf("the upgraded %s leads already", a.id)
		upgrade(peers[(l+1)%n])
		last = peers[(l+2)%n]
	} else {
		ol := peers[l]
		for _, p := range peers {
			if p != a && p != ol {
				last = p
			}
		}
		_ = last.cmd.Process.Signal(syscall.SIGSTOP)
		applies(a, "while-"+last.id+"-frozen")
		ol.stop(t)
		_ = last.cmd.Process.Signal(syscall.SIGCONT)
		if nl := leader(20 * time.Second); peers[nl] != a {
			t.Fatalf("%s leads after the old leader stopped, want the upgraded %s", peers[nl].id, a.id)
		}
		applies(last, "new-leader-old-follower")
		if v := a.metric("troupe_schedd_raft_schema"); v != state.OldestSchema {
			t.Errorf("a leader of this release with a follower of the previous one is in schema %v, want %d", v, state.OldestSchema)
		}
		ol.start(t, bin)
		applies(ol, "after-"+ol.id)
		allAlive("after upgrading the leader " + ol.id)
		t.Logf("peer %s (the leader) upgraded, %s leads, at %v", ol.id, peers[leader(10*time.Second)].id, time.Since(began).Round(time.Second))
	}
	// 3. The last follower.
	upgrade(last)
	stillRunning("after the schedd peers")
	// Every peer runs this release: the state moves to its schema.
	eventually.NoError(t, 20*time.Second, "every upgraded peer in this release's schema", func() error {
		var in []float64
		for _, p := range peers {
			in = append(in, p.metric("troupe_schedd_raft_schema"))
		}
		for _, v := range in {
			if v != state.SchemaVersion {
				return fmt.Errorf("schemas %v, want %d", in, state.SchemaVersion)
			}
		}
		return nil
	})

	// 4. The nodelets, one at a time: SIGQUIT leaves the containers
	// running, the new nodelet re-attaches to them.
	for _, nl := range nodelets {
		nl.signal(t, syscall.SIGQUIT)
		nl.start(t, bin)
		eventually.True(t, 30*time.Second, fmt.Sprintf("nodelet %s of this release re-attaching to a container", nl.name), func() bool {
			b, _ := os.ReadFile(nl.log)
			return strings.Contains(string(b), "re-attached to container")
		})
		applies(peers[leader(10*time.Second)], "after-"+nl.name)
		stillRunning("after upgrading " + nl.name)
		t.Logf("nodelet %s upgraded at %v", nl.name, time.Since(began).Round(time.Second))
	}

	close(stop)
	<-loadDone
	mu.Lock()
	t.Logf("%d jobs submitted and read back during the upgrade", len(acked))
	for _, p := range problems {
		t.Errorf("the client during the upgrade: %s", p)
	}
	mu.Unlock()
	if len(acked) < 10 {
		t.Errorf("only %d submits acknowledged during the upgrade", len(acked))
	}

	// The long jobs end as they would have: COMPLETED, once.
	if err := os.WriteFile(gofile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var jl api.JobList
	eventually.NoError(t, 90*time.Second, "every job ended", func() error {
		var err error
		if jl, err = cli.Jobs(ctx, 0, 0); err != nil {
			return err
		}
		done := 0
		for _, j := range jl.Jobs {
			if j.State.Terminal() {
				done++
			}
		}
		if done != len(jl.Jobs) {
			return fmt.Errorf("%d of %d jobs ended", done, len(jl.Jobs))
		}
		return nil
	})
	byName := map[string]int{}
	for _, j := range jl.Jobs {
		byName[j.Name]++
	}
	for _, j := range jl.Jobs {
		if j.State != api.JobCompleted || j.ExitCode != 0 {
			t.Errorf("job %d (%s) ended %s exit %d (%s)", j.ID, j.Name, j.State, j.ExitCode, j.Reason)
		}
		if byName[j.Name] != 1 {
			t.Errorf("job %s is there %d times", j.Name, byName[j.Name])
		}
		if long[j.ID] {
			continue
		}
		mu.Lock()
		ok := acked[j.ID]
		mu.Unlock()
		if !ok {
			t.Errorf("job %d (%s) was never acknowledged", j.ID, j.Name)
		}
	}
	if len(jl.Jobs) != len(acked)+len(long) {
		t.Errorf("%d jobs, want the %d acknowledged and %d long", len(jl.Jobs), len(acked), len(long))
	}
	for file, want := range map[string]map[uint64]bool{starts: long, ends: long, ran: acked} {
		got := lines(file)
		for id := range want {
			if k := got[strconv.FormatUint(id, 10)]; k != 1 {
				t.Errorf("job %d noted in %s %d times, want once", id, filepath.Base(file), k)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s names %d jobs, want %d", filepath.Base(file), len(got), len(want))
		}
	}
	t.Logf("rolling upgrade done in %v", time.Since(began).Round(time.Second))
}
