package network

import (
	"encoding/binary"
	"github.com/google/nftables"
	"maps"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestDefaultNetworkReach: with a routed default network, the submit
// host (reach_from) opens connections to a container and sees its own
// address (no NAT either way); a container reaches another of its own
// user's on the node, and one whose address schedd names as its user's
// elsewhere (SetPeers), but no other user's container, nor an address
// beyond the node it was not told of; a container reaches the node's
// listed host port and no other.
func TestDefaultNetworkReach(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	submit := outsideAt(t, "out0", 99)
	remote := outsideAt(t, "out1", 98) // another node's container, as it arrives here
	for _, ns := range []string{submit, remote} {
		inNS(t, ns, func() {
			if out, err := exec.Command("ip", "route", "add", DefaultSubnet, "via", "10.250.0.1").CombinedOutput(); err != nil {
				t.Fatalf("route to the node's containers: %v: %s", err, out)
			}
		})
	}
	m, err := New(t.TempDir(), "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	routed, _ := ParseNets("routed", []string{DefaultSubnet, "10.250.0.0/24"})
	from, _ := ParseNets("from", []string{"10.250.0.99/32"})
	if err := m.SetReach(Reach{Routed: routed, From: from, HostPorts: []uint16{7005}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Cleanup(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if !m.Routed() {
		t.Fatal("Routed() is false with routed networks set")
	}

	a, _ := attachAs(t, m, 1, 5101, 1, "main1", true, 1000)
	a2, _ := attachAs(t, m, 2, 5102, 1, "main1", true, 1000)
	b, _ := attachAs(t, m, 3, 5103, 1, "main1", true, 2000)
	listenIn(t, a.NetNS, "0.0.0.0:7002")
	listenIn(t, b.NetNS, "0.0.0.0:7002")
	listenIn(t, submit, "10.250.0.99:7000")

	if got, err := dialFrom(t, submit, a.Default+":7002"); err != nil || got != "10.250.0.99" {
		t.Errorf("submit host to a container: %q, %v; want an answer to 10.250.0.99", got, err)
	}
	if got, err := dialFrom(t, a.NetNS, "10.250.0.99:7000"); err != nil || got != a.Default {
		t.Errorf("container to the submit host: %q, %v; want it seen as %s (routed, no NAT)", got, err, a.Default)
	}
	if got, err := dialFrom(t, a2.NetNS, a.Default+":7002"); err != nil || got != a2.Default {
		t.Errorf("the same user's container on the node: %q, %v; want an answer to %s", got, err, a2.Default)
	}
	if got, err := dialWithin(t, b.NetNS, a.Default+":7002", time.Second); err == nil {
		t.Errorf("another user's container on the node reached a (answer %q)", got)
	}
	if got, err := dialWithin(t, a.NetNS, b.Default+":7002", time.Second); err == nil {
		t.Errorf("a reached another user's container on the node (answer %q)", got)
	}
	if got, err := dialWithin(t, remote, a.Default+":7002", time.Second); err == nil {
		t.Errorf("an address nobody named reached a (answer %q)", got)
	}
	if err := m.SetPeers(map[int][]string{1000: {"10.250.0.98", "10.199.0.200"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := dialFrom(t, remote, a.Default+":7002"); err != nil || got != "10.250.0.98" {
		t.Errorf("user 1000's container elsewhere to a: %q, %v; want an answer to 10.250.0.98", got, err)
	}
	if got, err := dialWithin(t, remote, b.Default+":7002", time.Second); err == nil {
		t.Errorf("user 1000's container elsewhere reached user 2000's (answer %q)", got)
	}
	want := map[string]uint32{a.Default: 1000, a2.Default: 1000, b.Default: 2000, "10.250.0.98": 1000}
	if got := ownerMap(t); !maps.Equal(got, want) {
		t.Errorf("the owner map holds %v, want %v (not 10.199.0.200, in the node's own subnet)", got, want)
	}

	node, err := net.Listen("tcp4", "0.0.0.0:7005")
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	go serve(node)
	other, err := net.Listen("tcp4", "0.0.0.0:7006")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go serve(other)
	if got, err := dialFrom(t, b.NetNS, "10.199.0.1:7005"); err != nil || got != b.Default {
		t.Errorf("container to the node's host port 7005: %q, %v", got, err)
	}
	if got, err := dialWithin(t, b.NetNS, "10.250.0.1:7006", time.Second); err == nil {
		t.Errorf("container reached the node's unlisted port 7006 (answer %q)", got)
	}
}

// TestSetReachChecked: reach settings the node cannot use are refused
// with the setting named.
func TestSetReachChecked(t *testing.T) {
	needNetNS(t)
	m, err := New(t.TempDir(), "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := ParseNets("routed", []string{"10.128.0.0/16"})
	if err := m.SetReach(Reach{Routed: other}); err == nil || !strings.Contains(err.Error(), "lies in no routed network") {
		t.Errorf("a default subnet outside the routed networks: %v", err)
	}
	if _, err := ParseNets("reach_from", []string{"10.1.2.3/24"}); err == nil || !strings.Contains(err.Error(), "reach_from") {
		t.Errorf("host bits set: %v", err)
	}
	if _, err := ParseNets("reach_from", []string{"fd00::/8"}); err == nil {
		t.Error("an IPv6 network was taken")
	}
}

// ownerMap reads DefaultTable's owner map: address → uid.
func ownerMap(t *testing.T) map[string]uint32 {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tbl := &nftables.Table{Family: nftables.TableFamilyINet, Name: DefaultTable}
	s, err := c.GetSetByName(tbl, setOwner)
	if err != nil {
		t.Fatalf("set %s: %v", setOwner, err)
	}
	elems, err := c.GetSetElements(s)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint32{}
	for _, e := range elems {
		out[net.IP(e.Key).String()] = binary.BigEndian.Uint32(e.Val)
	}
	return out
}

// TestDefaultNetworkAddressReowned: a left container's address stays in
// the owner sets until another container takes it (deleting set
// elements would cost the teardown an RCU grace period); when another
// user's container takes it, it is that user's, and reaches nothing of
// the first user's.
func TestDefaultNetworkAddressReowned(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	m, err := New(t.TempDir(), "node1", "10.250.0.1", "10.199.0.0/29") // .2 to .6
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Cleanup(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	j := testJob(1, 5301, 1)
	j.UID = 1000
	x, err := m.Attach(j, "main1", "x", true)
	if err != nil {
		t.Fatal(err)
	}
	y, _ := attachAs(t, m, 2, 5302, 1, "main1", true, 1000)
	listenIn(t, y.NetNS, "0.0.0.0:7002")
	if got, err := dialFrom(t, x.NetNS, y.Default+":7002"); err != nil || got != x.Default {
		t.Fatalf("x to its user's y: %q, %v", got, err)
	}
	if err := m.Detach(j, "main1", "x"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the rest of the subnet: the next address is x's again
		attachAs(t, m, uint64(10+i), uint32(5310+i), 1, "main1", true, 3000)
	}
	z, _ := attachAs(t, m, 3, 5303, 1, "main1", true, 2000)
	if z.Default != x.Default {
		t.Fatalf("z got %s, want x's %s again", z.Default, x.Default)
	}
	if got, err := dialWithin(t, z.NetNS, y.Default+":7002", time.Second); err == nil {
		t.Errorf("another user's container at a left container's address reached y (answer %q)", got)
	}
	if got := ownerMap(t)[z.Default]; got != 2000 {
		t.Errorf("%s is uid %d's in the owner map, want 2000's", z.Default, got)
	}
}
