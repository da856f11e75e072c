package network

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/troupe-hpc/troupe/internal/eventually"
)

// newPoolManager is newDefaultManager with a pool of n, full on return.
func newPoolManager(t *testing.T, dir string, n int) *Manager {
	t.Helper()
	m, err := New(dir, "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetPool(n); err != nil {
		t.Fatal(err)
	}
	if err := m.Cleanup(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	waitPool(t, m, n)
	return m
}

// waitPool waits until m's pool holds n.
func waitPool(t *testing.T, m *Manager, n int) {
	t.Helper()
	eventually.Equal(t, time.Minute, "the namespaces the pool holds", n, m.Pooled)
}

// poolLinks maps the pool's host links (trp*) on the node to their
// index.
func poolLinks(t *testing.T) map[string]int {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range links {
		if isPooled(l.Attrs().Name) {
			out[l.Attrs().Name] = l.Attrs().Index
		}
	}
	return out
}

// poolPins lists the namespaces pinned in m's pool directory.
func poolPins(t *testing.T, m *Manager) []string {
	t.Helper()
	ents, err := os.ReadDir(m.pool.dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, filepath.Join(m.pool.dir, e.Name()))
	}
	return out
}

// hostEnd is the index of container id's default veth on the node.
func hostEnd(t *testing.T, m *Manager, id string) int {
	t.Helper()
	m.mu.Lock()
	name := m.def.link(id)
	m.mu.Unlock()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatalf("default veth %s of %s: %v", name, id, err)
	}
	return l.Attrs().Index
}

func readIn(t *testing.T, path, file string) string {
	t.Helper()
	var b []byte
	var err error
	inNS(t, path, func() { b, err = os.ReadFile(file) })
	if err != nil {
		t.Fatalf("%s in %s: %v", file, path, err)
	}
	return strings.TrimSpace(string(b))
}

// TestPoolAttach: with a pool, a one-container session's and a
// two-container session's containers get a prepared namespace (their
// default veth is one the pool made) and work as without one: the
// addresses, the default route out (NAT), the session network, ARP
// retried every 100 ms; the pool refills; a container without egress
// takes none. Once they leave, only the pool's own links and pins are
// left.
func TestPoolAttach(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	out := outside(t)
	listenIn(t, out, "10.250.0.99:7000")
	m := newPoolManager(t, t.TempDir(), 3)
	pooled := map[int]bool{}
	for _, idx := range poolLinks(t) {
		pooled[idx] = true
	}
	if len(pooled) != 3 || len(poolPins(t, m)) != 3 {
		t.Fatalf("a full pool of 3: links %v, pins %v", poolLinks(t), poolPins(t, m))
	}

	one, oneID := attachAs(t, m, 1, 5201, 1, "main1", true, 1000) // another user's
	main1, mainID := attach(t, m, 2, 5202, 2, "main1", true)
	sub1, subID := attach(t, m, 2, 5202, 2, "sub1", true)
	for _, id := range []string{oneID, mainID, subID} {
		if idx := hostEnd(t, m, id); !pooled[idx] {
			t.Errorf("%s: its default veth (index %d) is not one the pool made (%v)", id, idx, pooled)
		}
	}
	got := ifaces(t, one.NetNS)
	if !slices.Contains(got[Iface], one.Default+"/16") || !slices.Contains(got[Iface], one.Addr+"/32") || got[DefaultIface] != nil {
		t.Errorf("pooled one-container session: %v; want %s and %s/32 on %s", got, one.Default, one.Addr, Iface)
	}
	got = ifaces(t, main1.NetNS)
	if !slices.Contains(got[Iface], main1.Addr+"/24") || !slices.Contains(got[DefaultIface], main1.Default+"/16") {
		t.Errorf("pooled session container: %v; want %s on %s, %s on %s", got, main1.Addr, Iface, main1.Default, DefaultIface)
	}
	for _, ep := range []Endpoint{one, main1, sub1} {
		if got, err := dialFrom(t, ep.NetNS, "10.250.0.99:7000"); err != nil || got != "10.250.0.1" {
			t.Errorf("%s to the outside: %q, %v; want it seen from the node (masquerade)", ep.Addr, got, err)
		}
	}
	listenIn(t, sub1.NetNS, sub1.Addr+":7005")
	if got, err := dialFrom(t, main1.NetNS, sub1.Addr+":7005"); err != nil || got != main1.Addr {
		t.Errorf("main1 to sub1 on the session network: %q, %v", got, err)
	}
	// The containers of two users' sessions still do not meet.
	listenIn(t, one.NetNS, "0.0.0.0:7006")
	for _, addr := range []string{one.Default, one.Addr} {
		if got, err := dialWithin(t, main1.NetNS, addr+":7006", time.Second); err == nil {
			t.Errorf("session 2 reached session 1 at %s (answer %q)", addr, got)
		}
	}
	for _, c := range []struct {
		ep    Endpoint
		iface string
	}{{one, Iface}, {main1, DefaultIface}} {
		if v := readIn(t, c.ep.NetNS, "/proc/sys/net/ipv4/neigh/"+c.iface+"/retrans_time_ms"); v != "100" {
			t.Errorf("%s %s: retrans_time_ms %s, want 100", c.ep.Addr, c.iface, v)
		}
	}

	waitPool(t, m, 3)
	sealed, _ := attach(t, m, 3, 5203, 1, "main1", false)
	if got := ifaces(t, sealed.NetNS); sealed.Default != "" || got[DefaultIface] != nil || len(got[Iface]) != 1 {
		t.Errorf("container without egress: %+v %v; want its session address alone", sealed, got)
	}
	if n := m.Pooled(); n != 3 {
		t.Errorf("a container without egress took from the pool: %d left of 3", n)
	}

	for _, c := range []struct {
		job  uint64
		vni  uint32
		n    int
		host string
	}{{1, 5201, 1, "main1"}, {2, 5202, 2, "main1"}, {2, 5202, 2, "sub1"}, {3, 5203, 1, "main1"}} {
		if err := m.Detach(testJob(c.job, c.vni, c.n), c.host, fmt.Sprintf("j%d-%s", c.job, c.host)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.reaper.wait(); err != nil {
		t.Fatal(err)
	}
	waitPool(t, m, 3)
	if links, _ := Links(); len(links) > 0 {
		t.Errorf("container links left: %v", links)
	}
	// A veth goes with its namespace: the kernel deletes a moment after.
	var pl map[string]int
	eventually.Within(10*time.Second, func() bool { pl = poolLinks(t); return len(pl) == 3 })
	if len(pl) != 3 || len(poolPins(t, m)) != 3 {
		t.Errorf("after the containers left: pool links %v, pins %v; want the pool's 3", pl, poolPins(t, m))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if pins := poolPins(t, m); len(pins) > 0 {
		t.Errorf("pins left after Close: %v", pins)
	}
	if _, err := os.Stat(m.pool.dir); !os.IsNotExist(err) {
		t.Errorf("pool directory after Close: %v", err)
	}
}

// TestPoolFreshOnly: a namespace a container used never comes back: the
// pool holds only namespaces it made, each with nothing but its
// loopback and an unaddressed default veth, whatever the containers
// before did in theirs.
func TestPoolFreshOnly(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	m := newPoolManager(t, t.TempDir(), 2)
	const mark = "127.9.9.9/32"
	for i := range 6 {
		job := testJob(uint64(i+1), uint32(5211+i), 1)
		id := fmt.Sprintf("j%d-main1", job.ID)
		ep, err := m.Attach(job, "main1", id, true)
		if err != nil {
			t.Fatal(err)
		}
		// What a job leaves in its namespace: an address, a route.
		inNS(t, ep.NetNS, func() {
			lo, _ := netlink.LinkByName("lo")
			a, _ := netlink.ParseAddr(mark)
			if err := netlink.AddrAdd(lo, a); err != nil {
				t.Errorf("marking %s: %v", id, err)
			}
		})
		if got := ifaces(t, ep.NetNS)["lo"]; !slices.Contains(got, mark) {
			t.Fatalf("mark not in %s: %v", id, got)
		}
		if err := m.Detach(job, "main1", id); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			waitPool(t, m, 2)
		}
	}
	waitPool(t, m, 2)
	if err := m.reaper.wait(); err != nil {
		t.Fatal(err)
	}
	pins := poolPins(t, m)
	if len(pins) != 2 {
		t.Fatalf("pool pins %v, want 2", pins)
	}
	for _, p := range pins {
		got := ifaces(t, p)
		want := map[string][]string{"lo": {"127.0.0.1/8"}, Iface: nil}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("pooled namespace %s: %v; want %v (nothing of a container's)", p, got, want)
		}
		var routes []netlink.Route
		inNS(t, p, func() { routes, _ = netlink.RouteList(nil, netlink.FAMILY_V4) })
		for _, r := range routes {
			if r.Dst == nil || !r.Dst.IP.IsLoopback() {
				t.Errorf("pooled namespace %s has a route %s", p, r)
			}
		}
	}
}

// TestPoolRecovery: a nodelet that dies leaves its pool; the next one's
// Cleanup deletes it (pins and links) and fills a pool of its own, while
// a container that took a pooled namespace before the crash is adopted
// with its default veth (found by its peer index), which its Detach
// deletes.
func TestPoolRecovery(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	out := outside(t)
	listenIn(t, out, "10.250.0.99:7000")
	dir := t.TempDir()
	m1, err := New(dir, "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	if err := m1.SetPool(3); err != nil {
		t.Fatal(err)
	}
	if err := m1.Cleanup(); err != nil {
		t.Fatal(err)
	}
	waitPool(t, m1, 3)
	kept := testJob(1, 5221, 1)
	ka, err := m1.Attach(kept, "main1", "j1-main1", true)
	if err != nil {
		t.Fatal(err)
	}
	keptEnd := hostEnd(t, m1, "j1-main1")
	waitPool(t, m1, 3)
	// m1 dies here, its pool full, its filler idle.
	m2, err := New(dir, "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.SetPool(1); err != nil {
		t.Fatal(err)
	}
	if err := m2.Adopt(kept, "main1", "j1-main1"); err != nil {
		t.Fatal(err)
	}
	if err := m2.Cleanup(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m2.Close() })
	waitPool(t, m2, 1)
	if idx := hostEnd(t, m2, "j1-main1"); idx != keptEnd {
		t.Errorf("adopted container's default veth: index %d, want %d", idx, keptEnd)
	}
	if pins := poolPins(t, m2); len(pins) != 1 {
		t.Errorf("after recovery: pool pins %v, want the new pool's 1", pins)
	}
	if pl := poolLinks(t); len(pl) != 2 {
		t.Errorf("after recovery: pool links %v, want the new pool's and the adopted container's", pl)
	}
	if got, err := dialFrom(t, ka.NetNS, "10.250.0.99:7000"); err != nil || got != "10.250.0.1" {
		t.Errorf("adopted container to the outside: %q, %v", got, err)
	}
	if err := m2.Detach(kept, "main1", "j1-main1"); err != nil {
		t.Fatal(err)
	}
	if err := m2.reaper.wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByIndex(keptEnd); err == nil {
		t.Errorf("adopted container's default veth left after Detach")
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	if pl := poolLinks(t); len(pl) > 0 {
		t.Errorf("pool links after Close: %v", pl)
	}
}

// TestSetPoolChecked: a pool size out of range is refused, naming it.
func TestSetPoolChecked(t *testing.T) {
	m, err := New(t.TempDir(), "node1", "10.250.0.1", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{-1, MaxPool + 1} {
		if err := m.SetPool(n); err == nil || !strings.Contains(err.Error(), fmt.Sprint(n)) {
			t.Errorf("SetPool(%d): %v", n, err)
		}
	}
}

// TestPoolWithoutDefaultNetwork: on a node without a default network
// the pool holds namespaces with their loopback alone, and containers
// of one- and two-container sessions take them: loopback up, their
// session address on eth0, the session's containers reaching each
// other.
func TestPoolWithoutDefaultNetwork(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	m, err := New(t.TempDir(), "node1", "10.250.0.1", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetPool(3); err != nil {
		t.Fatal(err)
	}
	if err := m.Cleanup(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	waitPool(t, m, 3)
	if pl := poolLinks(t); len(pl) > 0 {
		t.Errorf("pool links without a default network: %v", pl)
	}
	one, _ := attach(t, m, 1, 5231, 1, "main1", true)
	main1, _ := attach(t, m, 2, 5232, 2, "main1", true)
	sub1, _ := attach(t, m, 2, 5232, 2, "sub1", true)
	// Each container took a prepared namespace: the filler made three
	// more (pool entries are numbered, never reused). Pooled alone cannot
	// tell: the filler may have topped the pool up already.
	made := func() uint64 {
		m.pool.mu.Lock()
		defer m.pool.mu.Unlock()
		return m.pool.seq
	}
	eventually.Within(10*time.Second, func() bool { return made() >= 6 })
	if n := made(); n < 6 {
		t.Errorf("the pool made %d namespaces, want 6: the containers took nothing from it", n)
	}
	for _, ep := range []Endpoint{one, main1, sub1} {
		got := ifaces(t, ep.NetNS)
		if !slices.Contains(got["lo"], "127.0.0.1/8") || !slices.Contains(got[Iface], ep.Addr+"/24") || got[DefaultIface] != nil {
			t.Errorf("%s: %v; want lo and %s on %s alone", ep.Addr, got, ep.Addr, Iface)
		}
	}
	listenIn(t, one.NetNS, "127.0.0.1:7007")
	if _, err := dialFrom(t, one.NetNS, "127.0.0.1:7007"); err != nil {
		t.Errorf("loopback in a pooled namespace: %v", err)
	}
	listenIn(t, sub1.NetNS, sub1.Addr+":7008")
	if got, err := dialFrom(t, main1.NetNS, sub1.Addr+":7008"); err != nil || got != main1.Addr {
		t.Errorf("main1 to sub1 on the session network: %q, %v", got, err)
	}
}
