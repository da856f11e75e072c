package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
)

// reachHostPort and its neighbour are ports of the test hosts
// themselves: nodelet.hcl's host_ports lists the first alone.
const reachHostPort = 18786

// TestReachableJobs: on the default dev cluster (test hosts, routed
// default networks) jobs are reachable as on a cluster. The submit host
// (this process) reads a token from a server in a job at the job's
// routed address, and a job reads one from a server on the submit host,
// which sees the job's own address (no NAT either way). Two jobs of one
// user on two hosts reach each other; another user's containers, on
// either host, reach neither (and do reach the submit host: their
// network works). A job reaches the host port nodelet.hcl lists on its
// node, and not the port next to it. With python3-distributed, dask's
// own pattern runs: a scheduler on the submit host, a worker in a job,
// a result computed there and gathered back (the scheduler dials the
// worker).
func TestReachableJobs(t *testing.T) {
	needRunc(t)
	needBusybox(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // nobody's jobs write there
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "nodelet.hcl")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "host_ports = [%d]\n", reachHostPort), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TROUPE_NODELET_CONFIG", conf)
	c := startCluster(t, 2, "2")
	nss := c.hostNamespaces(2)
	m := regexp.MustCompile(`gateway=(10\.251\.[0-9]+\.254) containers=(10\.[0-9.]+/18)`).FindStringSubmatch(c.log.String())
	if m == nil {
		t.Fatalf("schedd --dev logged no uplink gateway and container range:\n%s", c.log)
	}
	gw := m[1]
	_, containers, _ := net.ParseCIDR(m[2])
	submit := serveSeen(t, gw, "from-submit")
	for _, ns := range nss {
		listenInNetNS(t, ns, fmt.Sprintf("0.0.0.0:%d", reachHostPort), "host-port-open")
		listenInNetNS(t, ns, fmt.Sprintf("0.0.0.0:%d", reachHostPort+1), "host-port-closed")
	}
	dial := func(addr string, port, w int) string {
		return fmt.Sprintf("$(busybox nc -w %d %s %d </dev/null 2>&1)", w, addr, port)
	}
	// Until it answers tok-*: the rules for another node's container
	// come a moment after it starts (its node reports its address to
	// schedd, which tells the other nodes).
	dialUntil := func(addr string) string {
		return fmt.Sprintf(`for i in $(seq 50); do r=$(busybox nc -w 2 %s 5000 </dev/null 2>&1); case "$r" in tok-*) break;; esac; sleep 0.2; done; echo "$r"`, addr)
	}
	serve := func(tok string) string { return fmt.Sprintf("while :; do echo %s | busybox nc -l -p 5000; done", tok) }

	// Job a, nobody's, on one host: the submit host both ways, the host
	// ports of its node; then it serves tok-a.
	a, _ := c.submitAs(65534, 65534, dir, "a", fmt.Sprintf(`
job "a" {
  resources { cpu = 1.5 }
  image   = "host"
  command = ["sh", "-c", %q]
  output  = "a-%%j.out"
}`, strings.Join([]string{
		"echo submit:" + dial(submit.IP.String(), submit.Port, 5),
		"g=$(busybox ip route | busybox awk '/^default/ {print $3}')",
		"echo open:" + dial("$g", reachHostPort, 3),
		"echo closed:" + dial("$g", reachHostPort+1, 2),
		"echo done",
		serve("tok-a"),
	}, "; ")))
	ja := c.waitState(a, 30*time.Second, func(j api.Job) bool { return j.State == api.JobRunning && j.Containers[0].Reach != "" })
	reachA := ja.Containers[0].Reach
	if ip := net.ParseIP(reachA); ip == nil || !containers.Contains(ip) {
		t.Fatalf("job a's reach address %q is not in the cluster's container range %s", reachA, containers)
	}
	outA := waitOutput(t, filepath.Join(dir, fmt.Sprintf("a-%d.out", a)), "done", 60*time.Second)
	if !strings.Contains(outA, "submit:from-submit seen="+reachA+"\n") {
		t.Errorf("job a did not reach the submit host with its own address %s:\n%s", reachA, outA)
	}
	if !strings.Contains(outA, "open:host-port-open") || strings.Contains(outA, "host-port-closed") {
		t.Errorf("job a: want its node's host port %d open and %d closed:\n%s", reachHostPort, reachHostPort+1, outA)
	}
	if got := readToken(t, reachA, 5000); got != "tok-a" {
		t.Errorf("the submit host read %q from job a at %s:5000, want tok-a", got, reachA)
	}

	// Job a2, nobody's too, on the other host: it reaches a.
	a2, _ := c.submitAs(65534, 65534, dir, "a2", fmt.Sprintf(`
job "a2" {
  resources { cpu = 1.5 }
  image   = "host"
  command = ["sh", "-c", %q]
  output  = "a2-%%j.out"
}`, "echo peer:$("+dialUntil(reachA)+"); echo done; "+serve("tok-a2")))
	ja2 := c.waitState(a2, 30*time.Second, func(j api.Job) bool { return j.State == api.JobRunning && j.Containers[0].Reach != "" })
	if ja2.Containers[0].Node == ja.Containers[0].Node {
		t.Fatalf("a and a2 both on %s; the test wants them on two hosts", ja.Containers[0].Node)
	}
	reachA2 := ja2.Containers[0].Reach
	outA2 := waitOutput(t, filepath.Join(dir, fmt.Sprintf("a2-%d.out", a2)), "done", 60*time.Second)
	if !strings.Contains(outA2, "peer:tok-a\n") {
		t.Errorf("job a2 did not reach its user's job a on the other host at %s:\n%s", reachA, outA2)
	}
	if got := readToken(t, reachA2, 5000); got != "tok-a2" {
		t.Errorf("the submit host read %q from job a2 at %s:5000, want tok-a2", got, reachA2)
	}

	// Another user's (this test's, root) session, a container on each
	// host: neither reaches a nor a2, both reach the submit host.
	checks := strings.Join([]string{
		"echo submit:" + dial(submit.IP.String(), submit.Port, 5),
		"echo other-a:" + dial(reachA, 5000, 3),
		"echo other-a2:" + dial(reachA2, 5000, 3),
	}, "; ")
	// main1 waits for sub1's word (over their session network): the
	// session ends with main1.
	b, code := c.submit(dir, "b", fmt.Sprintf(`
job "b" {
  cluster {
    size = 2
    mode = "multi-node"
  }
  resources { cpu = 0.5 }
  image   = "host"
  command = ["sh", "-c", %q]
  role "sub" {
    command = ["sh", "-c", %q]
  }
  output  = "b-%%j.%%h.out"
}`, checks+"; busybox nc -l -p 6000 </dev/null",
		checks+"; for i in $(seq 100); do echo fin | busybox nc main1 6000 && break; sleep 0.1; done"), "--wait")
	jb := c.job(b)
	if code != 0 || len(jb.Containers) != 2 || jb.Containers[0].Node == jb.Containers[1].Node {
		t.Fatalf("session b (exit %d) wants a container on each host: %+v", code, jb.Containers)
	}
	for _, h := range []string{"main1", "sub1"} {
		out, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("b-%d.%s.out", b, h)))
		if !strings.Contains(string(out), "submit:from-submit") {
			t.Errorf("another user's %s did not reach the submit host (the test proves nothing):\n%s", h, out)
		}
		if strings.Contains(string(out), "tok-") {
			t.Errorf("another user's %s reached nobody's jobs:\n%s", h, out)
		}
	}

	t.Run("dask", func(t *testing.T) {
		if exec.Command(debianPython, "-c", "import distributed").Run() != nil {
			t.Skip("SKIP: needs Debian's python3-distributed (`make deps` installs it)")
		}
		runDask(t, c, dir, gw)
	})

	for _, id := range []uint64{a, a2} {
		if _, _, code := c.run(dir, "bkill", strconv.FormatUint(id, 10)); code != 0 {
			t.Fatalf("bkill %d exited %d", id, code)
		}
		c.waitState(id, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
	}
	if left := sessionLinks(nss); left != "" {
		t.Errorf("links left after the jobs ended:\n%s", left)
	}
}

// debianPython is Debian's python3, whose python3-distributed the test
// uses (not one a version manager puts first on PATH).
const debianPython = "/usr/bin/python3"

// daskScheduler runs a dask scheduler on the submit host, prints its
// address, waits for a worker, has it compute 41+1 and gathers the
// result (the scheduler dials the worker for it).
const daskScheduler = `
import asyncio, sys
from distributed import Scheduler, Client

async def main():
    async with Scheduler(host=sys.argv[1], port=0, dashboard=False) as s:
        print("address", s.address, flush=True)
        async with Client(s.address, asynchronous=True) as c:
            await c.wait_for_workers(1)
            f = c.submit(lambda x: x + 1, 41, pure=False)
            print("result", await f, "on", list(s.workers), flush=True)

asyncio.run(main())
`

func runDask(t *testing.T, c *devCluster, dir, gw string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, debianPython, "-c", daskScheduler, gw)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "address tcp://") {
		t.Fatalf("dask scheduler: %q\n%s", lines.Text(), stderr.String())
	}
	addr := strings.TrimPrefix(lines.Text(), "address ")
	w, _ := c.submit(dir, "dask-worker", fmt.Sprintf(`
job "dask-worker" {
  resources {
    cpu    = 0.5
    memory = "1GiB"
  }
  image   = "host"
  command = [%q, "-m", "distributed.cli.dask_worker", %q, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--local-directory", "/tmp", "--death-timeout", "60"]
  output  = "dask-worker-%%j.out"
}`, debianPython, addr))
	defer func() {
		_, _, _ = c.run(dir, "bkill", strconv.FormatUint(w, 10))
		c.waitState(w, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
	}()
	if !lines.Scan() {
		out, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("dask-worker-%d.out", w)))
		t.Fatalf("dask scheduler ended without a result: %v\n%s\nworker:\n%s", ctx.Err(), stderr.String(), out)
	}
	j := c.job(w)
	if got := lines.Text(); !strings.HasPrefix(got, "result 42 on ['tcp://"+j.Containers[0].Reach+":") {
		t.Errorf("dask: %q, want 42 computed by the worker at its routed address %s", got, j.Containers[0].Reach)
	}
}

// serveSeen listens on addr:0 of the submit host (this process's
// network) and answers each connection with reply and the address it
// came from ("reply seen=IP").
func serveSeen(t *testing.T, addr, reply string) *net.TCPAddr {
	t.Helper()
	l, err := net.Listen("tcp4", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "%s seen=%s\n", reply, c.RemoteAddr().(*net.TCPAddr).IP)
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr)
}

// readToken connects from the submit host to addr:port and returns the
// first line the server sends ("" on failure).
func readToken(t *testing.T, addr string, port int) string {
	t.Helper()
	var line string
	eventually.Within(10*time.Second, func() bool {
		conn, err := net.DialTimeout("tcp4", net.JoinHostPort(addr, strconv.Itoa(port)), 2*time.Second)
		if err != nil {
			return false
		}
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		line, _ = bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		line = strings.TrimSpace(line)
		return line != ""
	})
	return line
}
