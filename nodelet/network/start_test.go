package network

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

// queues tells a link's transmit and receive queue counts (the kernel
// made it with), found by name in namespace path ("" for the node's).
func queues(t *testing.T, path, name string) (int, int) {
	t.Helper()
	var l netlink.Link
	var err error
	if path == "" {
		l, err = netlink.LinkByName(name)
	} else {
		inNS(t, path, func() { l, err = netlink.LinkByName(name) })
	}
	if err != nil {
		t.Fatalf("%s in %q: %v", name, path, err)
	}
	return l.Attrs().NumTxQueues, l.Attrs().NumRxQueues
}

// TestVethsOneQueue: every veth end a container gets, on the node and
// in its namespace, was made with one transmit and one receive queue:
// the session's veth, the default network's (made for the container or
// by the pool) and a sealed container's own pair. The kernel's default
// is a queue per possible CPU, cut to one afterwards with an RCU grace
// period under the RTNL lock, which every container starting beside it
// waits for.
func TestVethsOneQueue(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	if raw, err := os.ReadFile("/sys/devices/system/cpu/possible"); err == nil && strings.TrimSpace(string(raw)) == "0" {
		t.Log("one possible CPU: the kernel's default is one queue too, so this test cannot tell")
	}
	check := func(what, path, name string) {
		t.Helper()
		if tx, rx := queues(t, path, name); tx != 1 || rx != 1 {
			t.Errorf("%s %s: %d transmit and %d receive queues, want 1 and 1", what, name, tx, rx)
		}
	}
	for _, pool := range []int{0, 1} {
		t.Run(fmt.Sprintf("pool %d", pool), func(t *testing.T) {
			m := newPoolManager(t, t.TempDir(), pool)
			vni := uint32(5301 + pool)
			main1, mainID := attach(t, m, uint64(vni), vni, 2, "main1", true)
			sub1, subID := attach(t, m, uint64(vni), vni, 2, "sub1", true)
			sealed, _ := attach(t, m, uint64(vni)+100, vni+100, 1, "main1", false)
			for _, c := range []struct {
				ep   Endpoint
				id   string
				rank int
			}{{main1, mainID, 0}, {sub1, subID, 1}} {
				check("session veth", "", vethName(vni, c.rank))
				check("its peer", c.ep.NetNS, Iface)
				m.mu.Lock()
				def := m.def.link(c.id)
				m.mu.Unlock()
				check("default veth", "", def)
				check("its peer", c.ep.NetNS, DefaultIface)
			}
			check("sealed container's", sealed.NetNS, Iface)
			check("sealed container's", sealed.NetNS, sealedPeer)
		})
	}
}

// TestStaleLinksReplaced: links that still hold the names a container's
// veths get (a crash's leftovers, or a container's the reaper has not
// deleted yet) do not stop it: they are deleted and the container's own
// made, on a working session network.
func TestStaleLinksReplaced(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	m := newDefaultManager(t, t.TempDir())
	job := testJob(1, 5401, 2)
	m.mu.Lock()
	next := m.def.next
	m.mu.Unlock()
	stale := []string{vethName(5401, 0), vethName(5401, 1), defaultVeth(next)}
	for i, name := range stale {
		la := netlink.NewLinkAttrs()
		la.Name = name
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: fmt.Sprintf("stale%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	old := map[string]int{}
	for _, name := range stale {
		l, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		old[name] = l.Attrs().Index
	}
	var eps []Endpoint
	for _, c := range job.Containers {
		id := fmt.Sprintf("j1-%s", c.Host)
		ep, err := m.Attach(job, c.Host, id, true)
		if err != nil {
			t.Fatalf("%s beside stale links: %v", c.Host, err)
		}
		t.Cleanup(func() { _ = m.Detach(job, c.Host, id) })
		eps = append(eps, ep)
	}
	for name, idx := range old {
		if l, err := netlink.LinkByName(name); err != nil || l.Attrs().Index == idx {
			t.Errorf("%s: still the stale link (index %d), or gone: %v", name, idx, err)
		}
	}
	checkSession(t, job, eps, 7401)
}
