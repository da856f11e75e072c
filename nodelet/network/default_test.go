package network

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// inNS runs fn on a thread in the network namespace pinned at path, as
// a nodelet in that host would: sockets fn opens and the netlink and
// nftables calls it makes act there; the thread dies with fn.
func inNS(t testing.TB, path string, fn func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		ns, err := netns.GetFromPath(path)
		if err == nil {
			err = netns.Set(ns)
			ns.Close()
		}
		if err == nil {
			fn()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatalf("entering %s: %v", path, err)
	}
}

// serve accepts on l and answers each connection with its peer's
// address, as the server saw it.
func serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		fmt.Fprintf(c, "%s\n", c.RemoteAddr().(*net.TCPAddr).IP)
		c.Close()
	}
}

func listenIn(t *testing.T, path, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	var err error
	inNS(t, path, func() { l, err = net.Listen("tcp4", addr) })
	if err != nil {
		t.Fatalf("listening on %s in %s: %v", addr, path, err)
	}
	t.Cleanup(func() { l.Close() })
	go serve(l)
	return l
}

// dialFrom dials addr from the namespace at path and returns what the
// server answered (the source address it saw), or the error. It waits
// up to 3 s for the connection (a SYN whose ARP was lost is sent again
// after 1 s); after a first connection, blocked ones are told in a second.
func dialFrom(t *testing.T, path, addr string) (string, error) {
	return dialWithin(t, path, addr, 3*time.Second)
}

func dialWithin(t *testing.T, path, addr string, timeout time.Duration) (string, error) {
	t.Helper()
	var (
		got string
		err error
	)
	inNS(t, path, func() {
		var c net.Conn
		if c, err = net.DialTimeout("tcp4", addr, timeout); err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		got, err = bufio.NewReader(c).ReadString('\n')
		got = strings.TrimSpace(got)
	})
	return got, err
}

// outside makes a host beyond the node: a namespace with 10.250.0.99
// on the node's underlay (the bridge node0 nodeAddr made), where the
// submit host, a licence server or a dataset would be.
func outside(t *testing.T) string { return outsideAt(t, "out0", 99) }

// outsideAt is outside with address 10.250.0.<n>, its link to the
// underlay named link.
func outsideAt(t *testing.T, link string, n byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outside")
	if err := newNetNS(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeNetNS(path) })
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	br, err := netlink.LinkByName("node0")
	if err != nil {
		t.Fatal(err)
	}
	la := netlink.NewLinkAttrs()
	la.Name, la.MasterIndex = link, br.Attrs().Index
	_ = deleteLinks(la.Name)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deleteLinks(link) })
	if l, err := netlink.LinkByName(la.Name); err != nil {
		t.Fatal(err)
	} else if err := netlink.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, n2 := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(n2)
		if err != nil {
			t.Fatal(err)
		}
		if n2 == "eth0" {
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 250, 0, n), Mask: net.CIDRMask(24, 32)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// newDefaultManager is a Manager of node1 (10.250.0.1) with the default
// network set up, closed at the test's end.
func newDefaultManager(t *testing.T, dir string) *Manager {
	t.Helper()
	m, err := New(dir, "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Cleanup(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func attach(t *testing.T, m *Manager, job uint64, vni uint32, n int, host string, egress bool) (Endpoint, string) {
	t.Helper()
	return attachAs(t, m, job, vni, n, host, egress, 0)
}

// attachAs is attach for a job of user uid.
func attachAs(t *testing.T, m *Manager, job uint64, vni uint32, n int, host string, egress bool, uid int) (Endpoint, string) {
	t.Helper()
	j := testJob(job, vni, n)
	j.UID = uid
	id := fmt.Sprintf("j%d-%s", job, host)
	ep, err := m.Attach(j, host, id, egress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Detach(j, host, id) })
	return ep, id
}

func ifaces(t *testing.T, path string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	inNS(t, path, func() {
		links, _ := netlink.LinkList()
		for _, l := range links {
			addrs, _ := netlink.AddrList(l, netlink.FAMILY_V4)
			var as []string
			for _, a := range addrs {
				as = append(as, a.IPNet.String())
			}
			out[l.Attrs().Name] = as
		}
	})
	return out
}

// TestDefaultNetworkEgress: a container reaches a TCP server beyond its
// node through the default network, seen there with the node's address
// (NAT); it cannot reach a service on the node's own addresses (neither
// the node's address nor the gateway), nor another user's container on
// the default bridge.
func TestDefaultNetworkEgress(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	out := outside(t)
	listenIn(t, out, "10.250.0.99:7000")
	m := newDefaultManager(t, t.TempDir())

	a, _ := attach(t, m, 1, 5001, 1, "main1", true)
	b, _ := attachAs(t, m, 2, 5002, 1, "main1", true, 1000) // another user's
	if a.Default == "" || b.Default == "" || a.Default == b.Default {
		t.Fatalf("default addresses %q and %q: want two", a.Default, b.Default)
	}
	got, err := dialFrom(t, a.NetNS, "10.250.0.99:7000")
	if err != nil || got != "10.250.0.1" {
		t.Fatalf("container to the outside server: %q, %v; want an answer to the node's address 10.250.0.1 (masquerade)", got, err)
	}

	// The node's own services: listening on every address of the node.
	node, err := net.Listen("tcp4", "0.0.0.0:7001")
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	go serve(node)
	for _, addr := range []string{"10.250.0.1:7001", "10.199.0.1:7001"} {
		if got, err := dialWithin(t, a.NetNS, addr, time.Second); err == nil {
			t.Errorf("container reached the node's service at %s (answer %q)", addr, got)
		}
	}
	// The outside still reaches it: only the default bridge is shut out.
	if got, err := dialFrom(t, out, "10.250.0.1:7001"); err != nil {
		t.Errorf("outside host to the node's service: %q, %v", got, err)
	}

	// Session b's container (another user's) to session a's, on the
	// default network and at its session address.
	listenIn(t, a.NetNS, "0.0.0.0:7002")
	if _, err := dialFrom(t, b.NetNS, "10.250.0.99:7000"); err != nil {
		t.Fatalf("session b's container to the outside: %v", err)
	}
	// Twice: with br_netfilter passing bridged frames to the forward
	// hook (the filter drops them) and without (the ports' isolation
	// alone keeps them apart).
	const brnf = "/proc/sys/net/bridge/bridge-nf-call-iptables"
	for _, v := range []string{"1", "0"} {
		if os.WriteFile(brnf, []byte(v), 0o644) != nil && v == "0" {
			continue // no br_netfilter: the first round was without
		}
		for _, addr := range []string{a.Default, a.Addr} {
			if got, err := dialWithin(t, b.NetNS, addr+":7002", time.Second); err == nil {
				t.Errorf("bridge-nf-call-iptables=%s: session b reached session a at %s (answer %q)", v, addr, got)
			}
		}
	}
	_ = os.WriteFile(brnf, []byte("1"), 0o644)
	if got, err := dialFrom(t, a.NetNS, a.Addr+":7002"); err != nil {
		t.Errorf("a container to its own session address: %q, %v", got, err)
	}
}

// TestDefaultNetworkNoVXLANOut: a container cannot send VXLAN (UDP 4789)
// out through the node, where it would leave with the node's address and
// pass the session overlays' filter on the session's other nodes; other
// UDP goes out.
func TestDefaultNetworkNoVXLANOut(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	out := outside(t)
	m := newDefaultManager(t, t.TempDir())
	a, _ := attach(t, m, 1, 5011, 1, "main1", true)
	recv := func(port int) bool {
		var pc net.PacketConn
		var err error
		inNS(t, out, func() { pc, err = net.ListenPacket("udp4", fmt.Sprintf("10.250.0.99:%d", port)) })
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		inNS(t, a.NetNS, func() {
			c, err := net.Dial("udp4", fmt.Sprintf("10.250.0.99:%d", port))
			if err == nil {
				_, _ = c.Write(make([]byte, 16))
				c.Close()
			}
		})
		_ = pc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, _, err = pc.ReadFrom(make([]byte, 64))
		return err == nil
	}
	if !recv(4790) {
		t.Fatal("a datagram to UDP 4790 did not get out: the test proves nothing")
	}
	if recv(VXLANPort) {
		t.Error("a container sent a VXLAN datagram out of the node")
	}
}

// TestDefaultNetworkInterfaces: a multi-container session keeps its
// session network on eth0 (what MPI and troupe-ssh use) and gets the
// default network on eth1; a one-container session has no session
// bridge, its session address on its default interface eth0; without
// egress a container has no default network, and no route out.
func TestDefaultNetworkInterfaces(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	out := outside(t)
	listenIn(t, out, "10.250.0.99:7000")
	m := newDefaultManager(t, t.TempDir())

	main1, _ := attach(t, m, 1, 5021, 2, "main1", true)
	sub1, _ := attach(t, m, 1, 5021, 2, "sub1", true)
	got := ifaces(t, main1.NetNS)
	if !slices.Contains(got[Iface], main1.Addr+"/24") || !slices.Contains(got[DefaultIface], main1.Default+"/16") {
		t.Errorf("main1 of a two-container session: %v; want %s on %s, %s on %s", got, main1.Addr, Iface, main1.Default, DefaultIface)
	}
	listenIn(t, sub1.NetNS, sub1.Addr+":7003")
	if got, err := dialFrom(t, main1.NetNS, sub1.Addr+":7003"); err != nil || got != main1.Addr {
		t.Errorf("main1 to sub1 on the session network: %q, %v; want it seen from %s", got, err, main1.Addr)
	}
	if _, err := dialFrom(t, main1.NetNS, "10.250.0.99:7000"); err != nil {
		t.Errorf("main1 to the outside: %v", err)
	}
	links, _ := Links()
	if !slices.Contains(links, bridgeName(5021)) {
		t.Errorf("two-container session: no bridge %s in %v", bridgeName(5021), links)
	}

	one, _ := attach(t, m, 2, 5022, 1, "main1", true)
	got = ifaces(t, one.NetNS)
	if !slices.Contains(got[Iface], one.Default+"/16") || !slices.Contains(got[Iface], one.Addr+"/32") || got[DefaultIface] != nil {
		t.Errorf("one-container session: %v; want %s and %s/32 on %s", got, one.Default, one.Addr, Iface)
	}
	links, _ = Links()
	if slices.Contains(links, bridgeName(5022)) {
		t.Errorf("one-container session got a bridge: %v", links)
	}

	sealed, _ := attach(t, m, 3, 5023, 1, "main1", false)
	got = ifaces(t, sealed.NetNS)
	if sealed.Default != "" || !slices.Contains(got[Iface], sealed.Addr+"/24") || got[DefaultIface] != nil {
		t.Errorf("one-container session without egress: %+v %v; want only %s on %s", sealed, got, sealed.Addr, Iface)
	}
	listenIn(t, sealed.NetNS, sealed.Addr+":7004")
	if _, err := dialFrom(t, sealed.NetNS, sealed.Addr+":7004"); err != nil {
		t.Errorf("sealed container to its own session address: %v", err)
	}
	if _, err := dialFrom(t, sealed.NetNS, "10.250.0.99:7000"); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("sealed container to the outside: %v; want network unreachable", err)
	}

	sealed2, _ := attach(t, m, 4, 5024, 2, "sub1", false)
	if got := ifaces(t, sealed2.NetNS); sealed2.Default != "" || got[DefaultIface] != nil {
		t.Errorf("session container without egress: %+v %v; want no %s", sealed2, got, DefaultIface)
	}
}

// TestDefaultNetworkRecovery: a nodelet that died leaves the default
// bridge and its containers' veths; the next one finds the bridge again,
// keeps the veths of the containers it adopts (still reaching out), and
// removes the others. Close removes the bridge and the filter table.
func TestDefaultNetworkRecovery(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	out := outside(t)
	listenIn(t, out, "10.250.0.99:7000")
	dir := t.TempDir()
	m1, err := New(dir, "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	if err := m1.Cleanup(); err != nil {
		t.Fatal(err)
	}
	kept, orphan := testJob(1, 5031, 1), testJob(2, 5032, 1)
	ka, err := m1.Attach(kept, "main1", "j1-main1", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Attach(orphan, "main1", "j2-main1", true); err != nil {
		t.Fatal(err)
	}
	// m1 dies here. The next nodelet adopts j1 only.
	m2, err := New(dir, "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Adopt(kept, "main1", "j1-main1"); err != nil {
		t.Fatal(err)
	}
	if err := m2.Cleanup(); err != nil {
		t.Fatal(err)
	}
	links, _ := Links()
	if len(links) != 1 || !strings.HasPrefix(links[0], prefixDefault) {
		t.Errorf("after recovery: links %v, want the adopted container's default veth alone", links)
	}
	if _, err := os.Stat(filepath.Join(dir, "j2-main1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphan's namespace still pinned: %v", err)
	}
	if got, err := dialFrom(t, ka.NetNS, "10.250.0.99:7000"); err != nil || got != "10.250.0.1" {
		t.Errorf("adopted container to the outside: %q, %v", got, err)
	}
	// The adopted address is not handed out again.
	next, err := m2.Attach(testJob(3, 5033, 1), "main1", "j3-main1", true)
	if err != nil {
		t.Fatal(err)
	}
	if next.Default == ka.Default {
		t.Errorf("adopted container's address %s handed out again", ka.Default)
	}
	for _, j := range []struct {
		job  uint64
		vni  uint32
		host string
	}{{1, 5031, "main1"}, {3, 5033, "main1"}} {
		if err := m2.Detach(testJob(j.job, j.vni, 1), j.host, fmt.Sprintf("j%d-%s", j.job, j.host)); err != nil {
			t.Error(err)
		}
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(DefaultBridge); !isNotFound(err) {
		t.Errorf("%s after Close: %v", DefaultBridge, err)
	}
}

// TestDefaultSubnetChecked: a default subnet that overlaps the session
// networks or holds the node's address is refused, naming it.
func TestDefaultSubnetChecked(t *testing.T) {
	for _, c := range []struct{ subnet, want string }{
		{"10.64.3.0/24", "overlaps the session networks"},
		{"10.0.0.0/8", "overlaps the session networks"},
		{"10.250.0.0/16", "holds the node's address"},
		{"fd00::/64", "not an IPv4 CIDR"},
		{"10.199.0.0/30", "prefix"},
		{"nonsense", "not an IPv4 CIDR"},
	} {
		_, err := New(t.TempDir(), "node1", "10.250.0.1", c.subnet)
		if !errors.Is(err, ErrDefaultSubnet) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.subnet) {
			t.Errorf("New with default subnet %q: %v; want %q", c.subnet, err, c.want)
		}
	}
}
