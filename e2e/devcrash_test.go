package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/client"
	"github.com/troupe-hpc/troupe/internal/eventually"
)

// TestDevClusterCrash: a `schedd --dev` killed with SIGKILL takes its
// nodelets with it (their parent-death signal), and the next `schedd
// --dev` removes the test hosts (network namespaces and bridge) it left,
// while those of a dev cluster running all along are left alone and it
// goes on serving.
func TestDevClusterCrash(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: test hosts (network namespaces) need root (run `sudo make test`)")
	}
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP: test hosts need %s (iproute2, util-linux)", tool)
		}
	}
	hosts := []string{"--runtime", "process", "--dev-hosts", "netns"}
	live := startCluster(t, 1, "1", hosts...)
	liveNS := live.hostNamespaces(1)
	crashed := startCluster(t, 2, "1", hosts...)
	crashedNS := crashed.hostNamespaces(2)

	nodelets := children(t, crashed.cmd.Process.Pid)
	if len(nodelets) != 2 {
		t.Fatalf("schedd --dev has %d child processes (%v), want its 2 nodelets", len(nodelets), nodelets)
	}
	if err := crashed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-crashed.done
	eventually.NoError(t, 30*time.Second, "the killed schedd's nodelets ending", func() error {
		var left []int
		for _, pid := range nodelets {
			if alivePID(pid, crashed.dir) {
				left = append(left, pid)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("nodelets %v still run", left)
		}
		return nil
	})
	// What the killed schedd could not remove is still there...
	for _, ns := range crashedNS {
		if !netnsExists(t, ns) {
			t.Fatalf("test host %s of the killed cluster is gone before another started: the test proves nothing", ns)
		}
	}

	// ...until the next dev cluster starts.
	next := startCluster(t, 1, "1", hosts...)
	for _, ns := range crashedNS {
		if netnsExists(t, ns) {
			t.Errorf("test host %s of the killed cluster is still there after the next schedd --dev started", ns)
		}
	}
	if bridge := bridgeOf(crashedNS[0]); linkExists(bridge) {
		t.Errorf("bridge %s of the killed cluster is still there", bridge)
	}
	if !strings.Contains(next.log.String(), "removed the test hosts of a dev cluster whose schedd is gone") {
		t.Errorf("the next schedd --dev did not say it removed the killed cluster's test hosts")
	}
	for _, ns := range liveNS {
		if !netnsExists(t, ns) {
			t.Errorf("test host %s of the dev cluster running all along was removed", ns)
		}
	}
	if bridge := bridgeOf(liveNS[0]); !linkExists(bridge) {
		t.Errorf("bridge %s of the dev cluster running all along was removed", bridge)
	}
	c, err := client.New(live.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetTimeout(10 * time.Second)
	nodes, err := c.Nodes(context.Background())
	if err != nil || len(nodes.Nodes) != 1 || nodes.Nodes[0].State != api.NodeUp {
		t.Errorf("the dev cluster running all along: nodes %+v, %v; want node1 up", nodes.Nodes, err)
	}
}

// children are the pids of pid's child processes (those of every thread:
// a child is listed under the thread that created it).
func children(t *testing.T, pid int) []int {
	t.Helper()
	files, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	if err != nil || len(files) == 0 {
		t.Fatalf("children of %d: %v (no /proc/%d/task/*/children)", pid, err, pid)
	}
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		for _, w := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(w)
			if err != nil {
				t.Fatalf("%s: %q", f, b)
			}
			out = append(out, n)
		}
	}
	return out
}

// alivePID reports whether pid is a live process whose command line names
// dir (not a pid reused by something else, not a zombie).
func alivePID(pid int, dir string) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(strings.TrimSpace(string(stat[i+1:])), "Z") {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && strings.Contains(string(cmdline), dir)
}

func netnsExists(t *testing.T, ns string) bool {
	t.Helper()
	_, err := os.Stat("/run/netns/" + ns)
	return err == nil
}

func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", "dev", name).Run() == nil
}

// bridgeOf is the underlay bridge of test host ns (tr-<tag>-hN: tu<tag>).
func bridgeOf(ns string) string {
	tag, _, _ := strings.Cut(strings.TrimPrefix(ns, "tr-"), "-")
	return "tu" + tag
}
