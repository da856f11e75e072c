package network

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// envInNetNS marks the test binary re-run in a network namespace of its
// own.
const envInNetNS = "TROUPE_NETWORK_TEST_NETNS"

// TestMain runs the package's tests, as root, in a fresh network
// namespace (`unshare --net`): the bridges, filters and sysctls they make
// never touch the machine's own network, and vanish with the namespace.
func TestMain(m *testing.M) {
	if os.Geteuid() == 0 && os.Getenv(envInNetNS) == "" {
		if _, err := exec.LookPath("unshare"); err == nil {
			cmd := exec.Command("unshare", append([]string{"--net", "--", os.Args[0]}, os.Args[1:]...)...)
			cmd.Env = append(os.Environ(), envInNetNS+"=1")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); ok {
				os.Exit(ee.ExitCode())
			} else if err != nil {
				fmt.Fprintln(os.Stderr, "unshare --net:", err)
				os.Exit(2)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// needNetNS skips unless the test runs as root in its own namespace.
func needNetNS(t testing.TB) {
	t.Helper()
	if os.Getenv(envInNetNS) == "" {
		t.Skip("SKIP: network tests need root and unshare (util-linux)")
	}
	if err := exec.Command("ip", "link", "set", "lo", "up").Run(); err != nil {
		t.Skipf("SKIP: needs iproute2: %v", err)
	}
}

// testJob is a job of n containers on this node ("node1", 10.250.0.1)
// with session network vni, 10.64.<vni%256>.0/24.
func testJob(id uint64, vni uint32, n int) api.AssignedJob {
	subnet := fmt.Sprintf("10.64.%d.0/24", vni%256)
	j := api.AssignedJob{ID: id, Network: &api.Network{VNI: vni, Subnet: subnet}}
	for i := range n {
		host := "main1"
		if i > 0 {
			host = fmt.Sprintf("sub%d", i)
		}
		c := api.Container{Node: "node1", NodeAddr: "10.250.0.1", Addr: fmt.Sprintf("10.64.%d.%d", vni%256, i+2)}
		c.Rank, c.Host = i, host
		j.Containers = append(j.Containers, c)
	}
	return j
}

// nodeAddr gives this namespace the node's address, on a bridge with no port.
func nodeAddr(t testing.TB) {
	t.Helper()
	for _, c := range [][]string{
		{"link", "add", "node0", "type", "bridge"},
		{"addr", "add", "10.250.0.1/24", "dev", "node0"},
		{"link", "set", "node0", "up"},
	} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil && !strings.Contains(string(out), "File exists") && !strings.Contains(string(out), "already assigned") {
			t.Fatalf("ip %v: %v: %s", c, err, out)
		}
	}
}
