package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/nodelet/devhosts"
)

// hostNamespaces are the network namespaces of the cluster's test hosts
// (schedd --dev logs the underlay bridge tu<tag>; host i is tr-<tag>-h<i>).
func (c *devCluster) hostNamespaces(nodes int) []string {
	m := regexp.MustCompile(`bridge=tu([0-9a-f]+)`).FindStringSubmatch(c.log.String())
	if m == nil {
		c.t.Fatalf("schedd --dev did not put its nodelets in test hosts:\n%s", c.log)
	}
	var out []string
	for i := 1; i <= nodes; i++ {
		out = append(out, fmt.Sprintf("tr-%s-h%d", m[1], i))
	}
	return out
}

// sessionLinks lists troupe's session links (trb*, trx*, trv*) and
// containers' default veths (trd*) left in the test hosts; a default
// veth is deleted a moment after its container, so it waits for them.
func sessionLinks(nss []string) string {
	var left string
	eventually.Within(5*time.Second, func() bool { left = sessionLinksNow(nss); return left == "" })
	return left
}

func sessionLinksNow(nss []string) string {
	var b strings.Builder
	for _, ns := range nss {
		out, _ := exec.Command("ip", "-n", ns, "-o", "link").Output()
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 1 && regexp.MustCompile(`^tr[bxvd][0-9]`).MatchString(f[1]) {
				fmt.Fprintf(&b, "%s: %s\n", ns, strings.TrimSuffix(f[1], ":"))
			}
		}
	}
	return b.String()
}

// waitOutput waits until the file at path contains want.
func waitOutput(t *testing.T, path, want string, timeout time.Duration) string {
	t.Helper()
	return eventually.Value(t, timeout, fmt.Sprintf("%q in %s", want, path), func() (string, bool) {
		b, _ := os.ReadFile(path)
		return string(b), strings.Contains(string(b), want)
	})
}

// TestSessionNetworks: a multi-node session's containers reach each
// other by name across test hosts (bridge + VXLAN); a container of
// another session reaches none of them; nothing of either network
// outlives its session.
func TestSessionNetworks(t *testing.T) {
	needRunc(t)
	needBusybox(t)
	c := startCluster(t, 2, "2.5")
	nss := c.hostNamespaces(2)
	dir := t.TempDir()
	// Four 1-cpu containers over two 2.5-cpu hosts: two per host. Every sub
	// serves "hi-<host>" on TCP 5000; main1 asks sub2, on the other host.
	a, _ := c.submit(dir, "a", `
job "a" {
  cluster {
    size = 4
    mode = "multi-node"
  }
  resources { cpu = 1 }
  image   = "host"
  command = ["sh", "-c", "for i in $(seq 100); do r=$(sleep 0.5 | busybox nc sub2 5000 2>/dev/null); case \"$r\" in hi-*) echo \"$r\"; break;; esac; sleep 0.1; done; echo done; sleep 600"]
  role "sub" {
    command = ["sh", "-c", "while :; do echo hi-$(hostname) | busybox nc -l -p 5000; done"]
  }
  output = "a-%j.%h.out"
}`)
	ja := c.waitState(a, 30*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
	out := waitOutput(t, filepath.Join(dir, fmt.Sprintf("a-%d.main1.out", a)), "done", 30*time.Second)
	if !strings.Contains(out, "hi-sub2") {
		t.Errorf("main1 did not reach sub2 over TCP:\n%s", out)
	}
	main1, sub2 := ja.Containers[0], ja.Containers[2]
	if main1.Node == sub2.Node {
		t.Errorf("main1 and sub2 both on %s; the test wants them on different hosts", main1.Node)
	}
	if ja.Network == nil || sub2.Addr == "" {
		t.Fatalf("job %d has no session network: %+v", a, ja.Network)
	}

	// Another session, one container in each host's remaining half cpu,
	// tries session a's addresses: unreachable.
	var tries []string
	for _, ct := range ja.Containers[1:] {
		tries = append(tries, fmt.Sprintf("busybox nc -w 2 %s 5000 </dev/null && echo reached-%s || echo blocked-%s", ct.Addr, ct.Host, ct.Host))
	}
	b, code := c.submit(dir, "b", fmt.Sprintf(`
job "b" {
  cluster {
    size = 2
    mode = "multi-node"
  }
  resources { cpu = 0.5 }
  image   = "host"
  command = ["sh", "-c", %q]
  output  = "b-%%j.%%h.out"
}`, strings.Join(tries, "; ")), "--wait")
	if code != 0 {
		t.Fatalf("session b exited %d", code)
	}
	outB, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("b-%d.main1.out", b)))
	if strings.Contains(string(outB), "reached") || strings.Count(string(outB), "blocked") != 3 {
		t.Errorf("a container of session b reached session a:\n%s", outB)
	}

	if _, _, code := c.run(dir, "bkill", strconv.FormatUint(a, 10)); code != 0 {
		t.Fatalf("bkill exited %d", code)
	}
	c.waitState(a, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
	if left := sessionLinks(nss); left != "" {
		t.Errorf("session links left after both sessions ended:\n%s", left)
	}
}

// TestSessionSSHAndMPI: in a 4-container session over two test hosts,
// run as an unprivileged user, main1 reaches every container with
// troupe's ssh, sees the LSF and PyTorch variables and the hostfiles,
// and Debian's OpenMPI runs hostname and an allreduce on all four.
func TestSessionSSHAndMPI(t *testing.T) {
	needRunc(t)
	for _, p := range []string{"mpirun", "mpicc"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIP: needs %s (openmpi-bin, libopenmpi-dev; `make deps` installs them)", p)
		}
	}
	c := startCluster(t, 2, "2")
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // the job's user works there
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join(dir, "allreduce.c")
	if err := os.WriteFile(src, []byte(allreduceC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mpicc", "-o", filepath.Join(dir, "allreduce"), src).CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	script := strings.Join([]string{
		`set -e`,
		`echo "lsb: $LSB_JOBID|$LSB_HOSTS|$LSB_MCPU_HOSTS|$(cat $LSB_DJOB_HOSTFILE | tr '\n' ,)"`,
		`echo "ompi: $(cat $TROUPE_HOSTFILE | tr '\n' ,)"`,
		`echo "mpich: $(cat $TROUPE_MPICH_HOSTFILE | tr '\n' ,)"`,
		`for h in sub1 sub2 sub3; do ssh $h 'echo "torch: $(hostname) $MASTER_ADDR:$MASTER_PORT $WORLD_SIZE $RANK $NODE_RANK $(id -u)"'; done`,
		`mpirun --hostfile $TROUPE_HOSTFILE -np 4 hostname | sort | tr '\n' , | sed 's/^/mpi-hostname: /'; echo`,
		`mpirun -np 4 /data/allreduce`,
	}, "\n")
	id, code := c.submitAs(65534, 65534, dir, "mpi", fmt.Sprintf(`
job "mpi" {
  cluster {
    size = 4
    mode = "multi-node"
  }
  resources {
    cpu    = 1
    memory = "512MiB"
  }
  image   = "host"
  command = ["sh", "-c", %q]
  mount "data" {
    source   = %q
    target   = "/data"
    readonly = true
  }
  output = "mpi-%%j.out"
}`, script, dir), "--wait")
	out, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("mpi-%d.out", id)))
	if code != 0 {
		t.Fatalf("mpi job exited %d:\n%s", code, out)
	}
	j := c.job(id)
	nodes := map[string]bool{}
	for _, ct := range j.Containers {
		nodes[ct.Node] = true
	}
	if len(nodes) != 2 {
		t.Errorf("session spans %v, want both hosts", nodes)
	}
	for _, want := range []string{
		fmt.Sprintf("lsb: %d|main1 sub1 sub2 sub3|main1 1 sub1 1 sub2 1 sub3 1|main1,sub1,sub2,sub3,", id),
		"ompi: main1 slots=1,sub1 slots=1,sub2 slots=1,sub3 slots=1,",
		"mpich: main1:1,sub1:1,sub2:1,sub3:1,",
		"torch: sub1 main1:29500 4 1 1 65534",
		"torch: sub3 main1:29500 4 3 3 65534",
		"mpi-hostname: main1,sub1,sub2,sub3,",
		"allreduce: size 4 sum 10",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("main1 output lacks %q:\n%s", want, out)
		}
	}
}

// allreduceC sums rank+1 over every rank.
const allreduceC = `#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
	int rank, size, mine, sum = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	mine = rank + 1;
	MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) printf("allreduce: size %d sum %d\n", size, sum);
	MPI_Finalize();
	return sum == size * (size + 1) / 2 ? 0 : 1;
}
`

// submitAs is submit run by uid:gid instead of the test's user.
func (c *devCluster) submitAs(uid, gid uint32, dir, name, hcl string, flags ...string) (uint64, int) {
	c.t.Helper()
	path := filepath.Join(dir, name+".hcl")
	if err := os.WriteFile(path, []byte(hcl), 0o644); err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(bin+"/bsub", append(flags, path)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TROUPE_ADDR="+c.addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("bsub: %v", err)
	}
	m := submitted.FindStringSubmatch(string(out))
	if m == nil {
		c.t.Fatalf("bsub %s as %d: exit %d: %s%s", name, uid, code, out, stderr.String())
	}
	id, _ := strconv.ParseUint(m[1], 10, 64)
	return id, code
}

// TestRogueUnderlayHost: a host on the node network that is not one of a
// session's nodes cannot put frames on the session's overlay, though the
// VNI is no secret (issue 19 item 6b). The rogue builds its own VXLAN
// end with the session's VNI toward main1's node and sends to main1 by
// broadcast MAC: no UDP datagram reaches main1, no TCP answer comes
// back. The session's own nodes still talk (static FDB, no learning).
func TestRogueUnderlayHost(t *testing.T) {
	needRunc(t)
	needBusybox(t)
	c := startCluster(t, 2, "2.5")
	nss := c.hostNamespaces(2)
	dir := t.TempDir()
	id, _ := c.submit(dir, "s", `
job "s" {
  cluster {
    size = 2
    mode = "multi-node"
  }
  resources { cpu = 2 }
  image   = "host"
  command = ["sh", "-c", "sleep 600 | busybox nc -u -l -p 5002 & while :; do echo hi-$(hostname) | busybox nc -l -p 5000; done"]
  role "sub" {
    command = ["sh", "-c", "for i in $(seq 100); do r=$(sleep 0.5 | busybox nc main1 5000 2>/dev/null); case \"$r\" in hi-*) echo \"peer:$r\"; break;; esac; sleep 0.1; done; echo done; sleep 600"]
  }
  output = "s-%j.%h.out"
}`)
	j := c.waitState(id, 30*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
	main1, sub1 := j.Containers[0], j.Containers[1]
	if main1.Node == sub1.Node || j.Network == nil {
		t.Fatalf("want main1 and sub1 on two nodes with a session network: %+v %+v", j.Containers, j.Network)
	}
	out := waitOutput(t, filepath.Join(dir, fmt.Sprintf("s-%d.sub1.out", id)), "done", 60*time.Second)
	if !strings.Contains(out, "peer:hi-main1") {
		t.Fatalf("sub1 did not reach main1 across the overlay:\n%s", out)
	}

	bridge := "tu" + strings.TrimSuffix(strings.TrimPrefix(nss[0], "tr-"), "-h1")
	rogue, err := devhosts.Join(bridge, 99)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = devhosts.Leave(rogue) }()
	_, subnet, err := net.ParseCIDR(j.Network.Subnet)
	if err != nil {
		t.Fatal(err)
	}
	mine := append(net.IP(nil), subnet.IP.To4()...)
	mine[3] = 250
	vni := strconv.FormatUint(uint64(j.Network.VNI), 10)
	for _, step := range [][]string{
		{"ip", "link", "add", "rvx", "type", "vxlan", "id", vni, "local", rogue.IP, "dstport", "4789"},
		{"bridge", "fdb", "append", "00:00:00:00:00:00", "dev", "rvx", "dst", main1.NodeAddr},
		{"ip", "addr", "add", mine.String() + "/24", "dev", "rvx"},
		{"ip", "link", "set", "rvx", "up"},
	} {
		if b, err := exec.Command("ip", append([]string{"netns", "exec", rogue.NetNS}, step...)...).CombinedOutput(); err != nil {
			t.Fatalf("rogue host: %s: %v: %s", strings.Join(step, " "), err, b)
		}
	}
	rogueRun := func(stdin, script string) string {
		cmd := exec.Command("ip", "netns", "exec", rogue.NetNS, "sh", "-c", script)
		cmd.Stdin = strings.NewReader(stdin)
		b, _ := cmd.CombinedOutput()
		return string(b)
	}
	// As a session's node would: ARP for main1, then TCP.
	if got := rogueRun("", "busybox nc -w 3 "+main1.Addr+" 5000 </dev/null"); strings.Contains(got, "hi-") {
		t.Errorf("the rogue host got an answer from main1 over the session's VNI: %q", got)
	}
	// Blind injection, no answer needed: frames to the broadcast MAC.
	rogueRun("", "ip neigh replace "+main1.Addr+" lladdr ff:ff:ff:ff:ff:ff dev rvx nud permanent")
	for range 3 {
		rogueRun("rogue-was-here\n", "busybox nc -u -w 1 "+main1.Addr+" 5002")
	}
	time.Sleep(time.Second) // a window for a datagram that must not arrive
	if b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("s-%d.main1.out", id))); strings.Contains(string(b), "rogue") {
		t.Errorf("main1 received the rogue host's datagram:\n%s", b)
	}
	if _, _, code := c.run(dir, "bkill", strconv.FormatUint(id, 10)); code != 0 {
		t.Fatalf("bkill exited %d", code)
	}
	c.waitState(id, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
	if left := sessionLinks(nss); left != "" {
		t.Errorf("session links left after the session ended:\n%s", left)
	}
}

// listenInNetNS listens on addr in the named network namespace (`ip
// netns` name; "" for the test's own) and answers every connection with
// reply.
func listenInNetNS(t *testing.T, ns, addr, reply string) net.Listener {
	t.Helper()
	var (
		l   net.Listener
		err error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if ns != "" {
			runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
			var h netns.NsHandle
			if h, err = netns.GetFromName(ns); err != nil {
				return
			}
			defer h.Close()
			if err = netns.Set(h); err != nil {
				return
			}
		}
		l, err = net.Listen("tcp4", addr)
	}()
	<-done
	if err != nil {
		t.Fatalf("listening on %s in %q: %v", addr, ns, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, reply)
			c.Close()
		}
	}()
	return l
}

// TestDefaultNetwork (issue 20 item 1): every container has a route out
// through its node (NAT) besides its session network: main1 of a
// two-container session and a one-container session reach a TCP server
// on the submit host (the machine, through the test hosts' uplink);
// neither reaches a service on its node's own addresses; the second
// session, another user's, cannot reach the first over the default
// network (nor at its session address); a one-container session still finds itself as main1;
// a session in a partition with network { egress = false } has no route
// out. Nothing is left once the sessions end.
func TestDefaultNetwork(t *testing.T) {
	needRunc(t)
	needBusybox(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // nobody's job b writes there
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	parts := filepath.Join(dir, "partitions.hcl")
	if err := os.WriteFile(parts, []byte(`
partition "all" {
  nodes   = ["*"]
  default = true
}
partition "sealed" {
  nodes = ["*"]
  network { egress = false }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 1, "4", "--partitions", parts)
	nss := c.hostNamespaces(1)
	m := regexp.MustCompile(`gateway=(10\.251\.[0-9]+\.254)`).FindStringSubmatch(c.log.String())
	if m == nil {
		t.Fatalf("schedd --dev logged no uplink gateway:\n%s", c.log)
	}
	submitHost := listenInNetNS(t, "", m[1]+":0", "hello-from-submit-host").Addr().(*net.TCPAddr)
	nodeService := listenInNetNS(t, nss[0], "0.0.0.0:0", "node-service").Addr().(*net.TCPAddr)
	dial := func(host string, port int, w int) string {
		return fmt.Sprintf("$(busybox nc -w %d %s %d </dev/null 2>&1)", w, host, port)
	}

	a, _ := c.submit(dir, "a", fmt.Sprintf(`
job "a" {
  cluster { size = 2 }
  resources { cpu = 1 }
  image   = "host"
  command = ["sh", "-c", %q]
  role "sub" {
    command = ["sleep", "600"]
  }
  output = "a-%%j.%%h.out"
}`, strings.Join([]string{
		"busybox ip -4 -o addr show dev eth1",
		"echo submit:" + dial(submitHost.IP.String(), submitHost.Port, 5),
		"echo node:" + dial("10.250.0.1", nodeService.Port, 2),
		"echo gateway:" + dial("$(busybox ip route | busybox awk '/^default/ {print $3}')", nodeService.Port, 2),
		"echo done",
		"while :; do echo hi-a | busybox nc -l -p 5000; done",
	}, "; ")))
	ja := c.waitState(a, 30*time.Second, func(j api.Job) bool { return j.State == api.JobRunning })
	outA := waitOutput(t, filepath.Join(dir, fmt.Sprintf("a-%d.main1.out", a)), "done", 60*time.Second)
	if !strings.Contains(outA, "submit:hello-from-submit-host") {
		t.Errorf("main1 of a did not reach the submit host:\n%s", outA)
	}
	if strings.Contains(outA, "node-service") {
		t.Errorf("main1 of a reached a service on its node's own address:\n%s", outA)
	}
	dm := regexp.MustCompile(`inet (10\.[0-9]+\.[0-9]+\.[0-9]+)/[0-9]+`).FindStringSubmatch(outA)
	if dm == nil {
		t.Fatalf("main1 of a has no default address on eth1:\n%s", outA)
	}

	b, code := c.submitAs(65534, 65534, dir, "b", fmt.Sprintf(`
job "b" {
  resources { cpu = 1 }
  image   = "host"
  command = ["sh", "-c", %q]
  output  = "b-%%j.out"
}`, strings.Join([]string{
		"echo submit:" + dial(submitHost.IP.String(), submitHost.Port, 5),
		"echo hosts:$(grep -w main1 /etc/hosts | cut -f1)",
		"(echo hi-self | busybox nc -l -p 5001) & sleep 0.2; echo self:" + dial("main1", 5001, 2),
		"echo a-default:" + dial(dm[1], 5000, 2),
		"echo a-session:" + dial(ja.Containers[0].Addr, 5000, 2),
	}, "; ")), "--wait")
	outB, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("b-%d.out", b)))
	jb := c.job(b)
	if code != 0 || !strings.Contains(string(outB), "submit:hello-from-submit-host") {
		t.Errorf("one-container session b (exit %d) did not reach the submit host:\n%s", code, outB)
	}
	if !strings.Contains(string(outB), "hosts:"+jb.Containers[0].Addr+"\n") || !strings.Contains(string(outB), "self:hi-self") {
		t.Errorf("one-container session b does not find itself as main1 at %s:\n%s", jb.Containers[0].Addr, outB)
	}
	if strings.Contains(string(outB), "hi-a") {
		t.Errorf("session b reached session a:\n%s", outB)
	}

	s, code := c.submit(dir, "s", fmt.Sprintf(`
job "s" {
  partition = "sealed"
  resources { cpu = 1 }
  image   = "host"
  command = ["sh", "-c", %q]
  output  = "s-%%j.out"
}`, "busybox ip -4 route; echo submit:"+dial(submitHost.IP.String(), submitHost.Port, 3)), "--wait")
	outS, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("s-%d.out", s)))
	if code != 0 || strings.Contains(string(outS), "hello") || strings.Contains(string(outS), "default") || !strings.Contains(string(outS), "submit:") {
		t.Errorf("session in a partition without egress (exit %d) has a way out:\n%s", code, outS)
	}

	if _, _, code := c.run(dir, "bkill", strconv.FormatUint(a, 10)); code != 0 {
		t.Fatalf("bkill exited %d", code)
	}
	c.waitState(a, 30*time.Second, func(j api.Job) bool { return j.State.Terminal() })
	if left := sessionLinks(nss); left != "" {
		t.Errorf("links left after the sessions ended:\n%s", left)
	}
}
