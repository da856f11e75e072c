package network

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/troupe-hpc/troupe/internal/api"
)

// twoHostsJob builds two test hosts (namespaces, as the e2e tests'
// nodes are) joined by a veth pair of the underlay MTU, and attaches one
// container of a two-container session (job 9, VNI 4096) on each with a
// Manager of its own, the session direct at both ends; it returns the
// hosts, the containers' endpoints, the Managers and the job. Nothing
// to detach at the end: the links go with the host namespaces.
//
// With egress, each host has the default network too (no pool: a
// Manager's background work runs outside its host's namespace here) and
// the containers get it.
func twoHostsJob(t testing.TB, mtu int, egress bool) ([]testHost, []Endpoint, []*Manager, api.AssignedJob) {
	t.Helper()
	dir := t.TempDir()
	hosts := []testHost{{filepath.Join(dir, "hostA"), "10.250.9.1"}, {filepath.Join(dir, "hostB"), "10.250.9.2"}}
	for _, h := range hosts {
		if err := newNetNS(h.ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = removeNetNS(h.ns) })
	}
	underlay(t, hosts, mtu)
	job := api.AssignedJob{ID: 9, Network: &api.Network{VNI: 4096, Subnet: "10.64.9.0/24"}}
	for i, h := range hosts {
		c := api.Container{Node: fmt.Sprintf("host%d", i), NodeAddr: h.addr, Addr: fmt.Sprintf("10.64.9.%d", i+2)}
		c.Rank, c.Host = i, fmt.Sprintf("c%d", i)
		job.Containers = append(job.Containers, c)
	}
	var eps []Endpoint
	var ms []*Manager
	for i, h := range hosts {
		c := job.Containers[i]
		var ep Endpoint
		var m *Manager
		var err error
		inNS(t, h.ns, func() {
			subnet := ""
			if egress {
				subnet = DefaultSubnet
			}
			if m, err = New(filepath.Join(dir, c.Host), c.Node, h.addr, subnet); err != nil {
				return
			}
			if err = m.Cleanup(); err != nil {
				return
			}
			ep, err = m.Attach(job, c.Host, c.Host, egress)
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = removeNetNS(ep.NetNS) })
		eps, ms = append(eps, ep), append(ms, m)
	}
	return hosts, eps, ms, job
}

// ethtoolValue reads one of ethtool's legacy on/off offload settings
// (ETHTOOL_GTSO and the like) of link name in the calling thread's
// namespace, the way `ethtool -k` does, without the ethtool binary.
func ethtoolValue(name string, cmd uint32) (bool, error) {
	v, err := ethtool(name, cmd, 0)
	return v != 0, err
}

// The legacy ethtool commands for the offloads a TCP stream needs to
// cross the session network as 64 KiB segments (linux/ethtool.h).
var offloads = map[string]uint32{
	"tx-checksumming":      0x16, // ETHTOOL_GTXCSUM
	"scatter-gather":       0x18, // ETHTOOL_GSG
	"tcp-segmentation":     0x1e, // ETHTOOL_GTSO
	"generic-segmentation": 0x23, // ETHTOOL_GGSO
}

// nftablesHas tells whether the calling thread's namespace has the inet
// table name.
func nftablesHas(name string) (bool, error) {
	c, err := nftables.New()
	if err != nil {
		return false, err
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, err
	}
	for _, t := range tables {
		if t.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// TestDirectOverlay: a session with one container on each of two
// nodes gets no bridge and no veth: each container's eth0 is the
// session's VXLAN device itself (its VNI, learning off, UDP 4789 from
// the node's address, the MTU of the underlay less 50, the container's
// MAC, segmentation and receive offloads on and 64 KiB GSO/GRO sizes),
// its socket in the node's namespace, under the node's filter; the
// containers talk over it; Detach deletes it even while a process
// keeps the namespace, so the VNI is free for the next session at once.
func TestDirectOverlay(t *testing.T) {
	needNetNS(t)
	for _, mtu := range []int{1500, 9000} {
		t.Run(fmt.Sprintf("underlay-mtu=%d", mtu), func(t *testing.T) { testDirectOverlay(t, mtu, false) })
	}
	// With the default network, its veth is eth1 beside the VXLAN eth0.
	t.Run("egress", func(t *testing.T) { testDirectOverlay(t, 1500, true) })
}

func testDirectOverlay(t *testing.T, mtu int, egress bool) {
	hosts, eps, ms, job := twoHostsJob(t, mtu, egress)
	for i, h := range hosts {
		inNS(t, h.ns, func() {
			links, err := Links()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range links {
				if !strings.HasPrefix(l, prefixDefault) {
					t.Errorf("%s: node links %v; want no session link (no bridge, no veth)", h.addr, links)
					break
				}
			}
			if ok, err := nftablesHas(FilterTable); err != nil || !ok {
				t.Errorf("%s: table %s: %v, %v; want the session's filter where its socket is", h.addr, FilterTable, ok, err)
			}
		})
		c := job.Containers[i]
		inNS(t, eps[i].NetNS, func() {
			l, err := netlink.LinkByName(Iface)
			if err != nil {
				t.Fatal(err)
			}
			vx, ok := l.(*netlink.Vxlan)
			if !ok {
				t.Fatalf("%s in %s is a %s, want the session's vxlan", Iface, c.Host, l.Type())
			}
			a := vx.Attrs()
			if vx.VxlanId != 4096 || vx.Learning || vx.Port != VXLANPort || !vx.SrcAddr.Equal(net.ParseIP(h.addr)) {
				t.Errorf("%s: VNI %d learning %v port %d local %v, want 4096, off, %d, %s", c.Host, vx.VxlanId, vx.Learning, vx.Port, vx.SrcAddr, VXLANPort, h.addr)
			}
			if a.MTU != mtu-vxlanOverhead || a.HardwareAddr.String() != containerMAC(net.ParseIP(c.Addr)).String() || a.Flags&net.FlagUp == 0 {
				t.Errorf("%s: MTU %d MAC %s flags %v, want %d, %s, up", c.Host, a.MTU, a.HardwareAddr, a.Flags, mtu-vxlanOverhead, containerMAC(net.ParseIP(c.Addr)))
			}
			if a.GSOMaxSize < 65536 || a.GROMaxSize < 65536 {
				t.Errorf("%s: gso_max_size %d gro_max_size %d, want 64 KiB at least", c.Host, a.GSOMaxSize, a.GROMaxSize)
			}
			for name, cmd := range offloads {
				if on, err := ethtoolValue(Iface, cmd); err != nil || !on {
					t.Errorf("%s: %s offload %v (%v), want on", c.Host, name, on, err)
				}
			}
			// GRO off: the segments arrive whole, and the GRO cell's
			// pass over each costs more than the backlog's.
			if on, err := ethtoolValue(Iface, ethtoolGGRO); err != nil || on {
				t.Errorf("%s: generic-receive offload %v (%v), want off", c.Host, on, err)
			}
			d, err := netlink.LinkByName(DefaultIface)
			switch {
			case egress && (err != nil || d.Type() != "veth"):
				t.Errorf("%s: %s %v, want the default network's veth", c.Host, DefaultIface, err)
			case !egress && err == nil:
				t.Errorf("%s: %s (%s) without egress", c.Host, DefaultIface, d.Type())
			}
		})
	}
	addr := eps[1].Addr + ":7101"
	listenIn(t, eps[1].NetNS, addr)
	if got, err := dialFrom(t, eps[0].NetNS, addr); err != nil || got != eps[0].Addr {
		t.Fatalf("%s to %s over the overlay: %q, %v", eps[0].Addr, addr, got, err)
	}

	// A process outliving the container keeps its namespace: the device
	// must go anyway, or it would hold the VNI.
	held, err := netns.GetFromPath(eps[0].NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	c0 := job.Containers[0]
	inNS(t, hosts[0].ns, func() {
		if err = ms[0].Detach(job, c0.Host, c0.Host); err == nil {
			err = ms[0].reaper.wait()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := netlink.NewHandleAt(held); err == nil {
		if l, err := h.LinkByName(Iface); err == nil {
			t.Errorf("after Detach: %s (%s) still in the container's namespace", Iface, l.Type())
		}
		h.Close()
	}
	inNS(t, hosts[0].ns, func() {
		if _, err = ms[0].Attach(job, c0.Host, "again", false); err == nil {
			err = ms[0].Detach(job, c0.Host, "again")
		}
	})
	if err != nil {
		t.Errorf("the same session again right after Detach: %v", err)
	}
}

// TestDirectOverlayRecovery: a nodelet that dies leaves a direct
// session's VXLAN device in its container's namespace. The next one
// either adopts the container (Cleanup keeps the device, the containers
// still talk, Detach deletes it) or not (Cleanup deletes the device even
// while a process keeps the namespace, and the VNI is free at once).
func TestDirectOverlayRecovery(t *testing.T) {
	needNetNS(t)
	hosts, eps, ms, job := twoHostsJob(t, 1500, false)
	c0 := job.Containers[0]
	held, err := netns.GetFromPath(eps[0].NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	iface := func() string {
		h, err := netlink.NewHandleAt(held)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if l, err := h.LinkByName(Iface); err == nil {
			return l.Type()
		}
		return ""
	}
	in := func(fn func() error) {
		t.Helper()
		inNS(t, hosts[0].ns, func() { err = fn() })
		if err != nil {
			t.Fatal(err)
		}
	}

	// Adopted: kept, working, then detached.
	var m2 *Manager
	in(func() (err error) {
		if m2, err = New(ms[0].dir, c0.Node, hosts[0].addr, ""); err != nil {
			return err
		}
		if err = m2.Adopt(job, c0.Host, c0.Host); err != nil {
			return err
		}
		return m2.Cleanup()
	})
	if got := iface(); got != "vxlan" {
		t.Fatalf("adopted: %s is %q, want the session's vxlan kept", Iface, got)
	}
	addr := eps[1].Addr + ":7102"
	listenIn(t, eps[1].NetNS, addr)
	if got, err := dialFrom(t, eps[0].NetNS, addr); err != nil || got != eps[0].Addr {
		t.Errorf("adopted: %s to %s: %q, %v", eps[0].Addr, addr, got, err)
	}
	in(func() error {
		if err := m2.Detach(job, c0.Host, c0.Host); err != nil {
			return err
		}
		return m2.reaper.wait()
	})
	if got := iface(); got != "" {
		t.Errorf("adopted, then detached: %s is still there (%s)", Iface, got)
	}

	// Not adopted: Cleanup deletes the device; the VNI is free.
	var ep Endpoint
	in(func() (err error) {
		ep, err = m2.Attach(job, c0.Host, "second", false)
		return err
	})
	held2, err := netns.GetFromPath(ep.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer held2.Close()
	var m3 *Manager
	in(func() (err error) {
		if m3, err = New(ms[0].dir, c0.Node, hosts[0].addr, ""); err != nil {
			return err
		}
		return m3.Cleanup()
	})
	if h, err := netlink.NewHandleAt(held2); err == nil {
		if l, err := h.LinkByName(Iface); err == nil {
			t.Errorf("not adopted: after Cleanup %s (%s) still in the old container's namespace", Iface, l.Type())
		}
		h.Close()
	}
	in(func() error {
		if _, err := m3.Attach(job, c0.Host, "third", false); err != nil {
			return fmt.Errorf("the same session after Cleanup: %w", err)
		}
		return m3.Detach(job, c0.Host, "third")
	})
}

// TestDirectOverlayPooled: a direct session's container that takes a
// prepared namespace from the pool gets the session's VXLAN device as
// eth0 and the pooled default veth as eth1, each with its address; both
// go with Detach.
func TestDirectOverlayPooled(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	m := newPoolManager(t, t.TempDir(), 1)
	job := testJob(31, 5151, 2)
	job.Containers[1].Node, job.Containers[1].NodeAddr = "node2", "10.250.0.2"
	ep, err := m.Attach(job, "main1", "main1", true)
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	end := m.def.links["main1"]
	m.mu.Unlock()
	if !isPooled(end) {
		t.Fatalf("default veth host end %q: the container took no namespace from the pool", end)
	}
	got := ifaces(t, ep.NetNS)
	if a := got[Iface]; len(a) != 1 || a[0] != ep.Addr+"/24" {
		t.Errorf("%s addresses %v, want %s/24 (all: %v)", Iface, a, ep.Addr, got)
	}
	if a := got[DefaultIface]; len(a) != 1 || a[0] != ep.Default+"/16" {
		t.Errorf("%s addresses %v, want %s/16 (all: %v)", DefaultIface, a, ep.Default, got)
	}
	inNS(t, ep.NetNS, func() {
		for name, typ := range map[string]string{Iface: "vxlan", DefaultIface: "veth"} {
			if l, err := netlink.LinkByName(name); err != nil || l.Type() != typ {
				t.Errorf("%s: %v, want a %s", name, err, typ)
			}
		}
		if on, err := ethtoolValue(Iface, ethtoolGGRO); err != nil || on {
			t.Errorf("%s: generic-receive offload %v (%v), want off", Iface, on, err)
		}
	})
	if links, err := Links(); err != nil || len(links) > 0 {
		t.Errorf("node links %v, %v: want none but the pooled default veth's host end (%s)", links, err, end)
	}
	held, err := netns.GetFromPath(ep.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := m.Detach(job, "main1", "main1"); err != nil {
		t.Fatal(err)
	}
	noLeak(t, m)
	if h, err := netlink.NewHandleAt(held); err == nil {
		if l, err := h.LinkByName(Iface); err == nil {
			t.Errorf("after Detach: %s (%s) still in the container's namespace", Iface, l.Type())
		}
		h.Close()
	}
}
