package network

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/api"
)

// overlayMTU is the MTU of a session's links when it spans nodes whose
// underlay links have MTU underlay: what is left of it after VXLAN's
// headers, so that an encapsulated frame is never fragmented and a
// jumbo-frame underlay (MTU 9000) gives sessions jumbo frames too (8950)
// instead of 1500: each frame cut to a smaller MTU costs the kernel a
// packet on the way and an aggregation (GRO) at the other end. Every
// node of a cluster must have the same underlay MTU, as for any L2
// overlay: a frame larger than the other end's MTU is dropped.
func overlayMTU(underlay int) int { return min(underlay-vxlanOverhead, maxOverlayMTU) }

// maxOverlayMTU is the largest MTU of a VXLAN device with no lower
// device (IP's 65535 less its headers).
const maxOverlayMTU = 65535 - vxlanOverhead

// underlayMTU is the MTU of the link that holds ip; 1500 when unknown.
func underlayMTU(ip net.IP) int {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return 1500
	}
	for _, a := range addrs {
		if a.IP.Equal(ip) {
			if l, err := netlink.LinkByIndex(a.LinkIndex); err == nil && l.Attrs().MTU > 0 {
				return l.Attrs().MTU
			}
		}
	}
	return 1500
}

// acquire returns the session's network on this node, creating it for
// the first container. The others do not wait for it here: they make
// their own namespace and default links meanwhile, and wait on s.ready
// (plug) only to put their veth on the session's bridge. m.mu is not
// held.
func (m *overlay) acquire(job api.AssignedJob) (*session, error) {
	vni := job.Network.VNI
	m.mu.Lock()
	if s := m.sessions[vni]; s != nil {
		s.users++
		m.mu.Unlock()
		return s, nil
	}
	s := m.newSession(job, true)
	s.users, s.ready = 1, make(chan struct{})
	m.sessions[vni] = s
	prev := m.dying[vni]
	m.mu.Unlock()
	// A previous session of this VNI (the VNI came round again) whose
	// links are still being deleted: they go first, here if the reaper
	// has not got to them.
	if prev != nil {
		m.finish(prev)
	}
	var err error
	if h := testHookCreate.Load(); h != nil {
		err = (*h)(m.Manager)
	}
	// The filter first: the VXLAN device takes no frame from a host
	// outside the session from the moment it exists.
	if err == nil && s.vxlan != "" {
		err = m.rules.syncFilter()
	}
	if err == nil {
		if err = m.create(s, vni); err != nil {
			_ = deleteLinks(s.vxlan, s.bridge)
		}
	}
	if err != nil {
		m.mu.Lock()
		if m.sessions[vni] == s {
			delete(m.sessions, vni)
		}
		s.err = err
		m.mu.Unlock()
		close(s.ready)
		if s.vxlan != "" {
			_ = m.rules.syncFilter()
		}
		return nil, err
	}
	close(s.ready)
	return s, nil
}

// newSession is job's session network on this node as Attach (direct
// allowed) or Adopt (told) makes it: a bridge, and a VXLAN device when
// it spans other nodes; direct when it has one container here and
// others elsewhere. Its users and ready are the caller's.
func (m *overlay) newSession(job api.AssignedJob, direct bool) *session {
	s := &session{bridge: bridgeName(job.Network.VNI), mtu: 1500, devNS: -1}
	s.peers = remoteNodes(job, m.node, m.local)
	if len(s.peers) > 0 {
		s.vxlan, s.mtu = vxlanName(job.Network.VNI), overlayMTU(m.mtu)
		s.remotes = remoteContainers(job, m.node, m.local)
		if direct && len(job.Containers)-len(s.remotes) == 1 {
			s.direct, s.bridge = true, ""
		}
	}
	return s
}

// create makes the session's bridge and, when it spans other nodes, its
// VXLAN device (vxlanDevice); a direct session's device is its
// container's (plug), so create makes nothing for it.
func (m *overlay) create(s *session, vni uint32) error {
	// Stale links of the same name (a session whose VNI came round
	// again while a crash left them) are replaced: a VXLAN device left
	// with the VNI would hold its socket; the bridge by addLink, without
	// a lookup first (a direct session makes none: one left is deleted).
	if s.direct {
		_ = deleteLinks(s.vxlan, bridgeName(vni))
		return nil
	}
	if s.vxlan != "" {
		_ = deleteLinks(s.vxlan)
	}
	la := netlink.NewLinkAttrs()
	la.Name, la.MTU = s.bridge, s.mtu
	br := &netlink.Bridge{LinkAttrs: la}
	if err := addLink(br); err != nil {
		return fmt.Errorf("bridge %s: %w", s.bridge, err)
	}
	noIPv6(s.bridge) // before it is up
	if err := linkUp(s.bridge); err != nil {
		return fmt.Errorf("bridge %w", err)
	}
	s.index = br.Index // before ready closes: the other containers read it then
	if s.vxlan != "" {
		la := netlink.NewLinkAttrs()
		la.Name, la.MTU, la.MasterIndex = s.vxlan, s.mtu, br.Index
		if err := m.vxlanDevice(nil, la, vni, s); err != nil {
			return err
		}
	}
	return nil
}

// drop is release for a container whose Attach failed, holding s: a
// session whose creation failed has left m.sessions already (its
// containers hold nothing), and a new session of the same VNI may be
// there since.
func (m *overlay) drop(vni uint32, s *session) {
	m.mu.Lock()
	current := m.sessions[vni] == s
	m.mu.Unlock()
	if current {
		m.release(vni)
	}
}

// vxlanDevice makes a session's VXLAN device with attributes la (name,
// MTU, and master or namespace) and sets it up: its local end on the
// node's advertised address, learning off, an all-zero FDB entry per
// peer node (broadcast and ARP by head-end replication) and a static
// entry per container on a peer (its MAC, containerMAC, to its node), so
// no entry ever comes from what a datagram claims. The device is always
// made from the nodelet's namespace, which keeps its UDP socket there
// (and under FilterTable) even when la puts the device in a container's
// namespace; h is a handle in the namespace the device lands in (nil:
// the nodelet's).
func (m *overlay) vxlanDevice(h *netlink.Handle, la netlink.LinkAttrs, vni uint32, s *session) error {
	if err := netlink.LinkAdd(&netlink.Vxlan{LinkAttrs: la, VxlanId: int(vni), SrcAddr: m.local, Port: VXLANPort, Learning: false}); err != nil {
		return fmt.Errorf("vxlan %s (VNI %d): %w", la.Name, vni, err)
	}
	if h == nil {
		h = &netlink.Handle{} // as netlink's own functions: the calling thread's namespace
		noIPv6(la.Name)       // (one made in a container's namespace has it off already: newNetNS)
	}
	// Found again by name where it is: LinkAdd's own lookup of the index
	// is in the nodelet's namespace.
	vx, err := h.LinkByName(la.Name)
	if err != nil {
		return fmt.Errorf("vxlan %s (VNI %d): %w", la.Name, vni, err)
	}
	fdb := func(mac net.HardwareAddr, node net.IP) error {
		err := h.NeighAppend(&netlink.Neigh{
			LinkIndex: vx.Attrs().Index, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
			State: netlink.NUD_PERMANENT | netlink.NUD_NOARP, IP: node, HardwareAddr: mac,
		})
		if err != nil {
			return fmt.Errorf("vxlan %s: fdb entry %s for %s: %w", la.Name, mac, node, err)
		}
		return nil
	}
	for _, r := range s.peers {
		// All-zero MAC: flood broadcast and unknown unicast to r.
		if err := fdb(make(net.HardwareAddr, 6), r); err != nil {
			return err
		}
	}
	for addr, node := range s.remotes {
		if mac := containerMAC(net.ParseIP(addr)); mac != nil {
			if err := fdb(mac, node); err != nil {
				return err
			}
		}
	}
	return h.LinkSetUp(vx)
}

// release drops one container's hold on the session's network and,
// with the last, hands its links to a teardown in the background. m.mu
// is not held.
func (m *overlay) release(vni uint32) {
	m.mu.Lock()
	s := m.sessions[vni]
	if s == nil {
		m.mu.Unlock()
		return
	}
	if s.users--; s.users > 0 {
		m.mu.Unlock()
		return
	}
	delete(m.sessions, vni)
	td := &teardown{vni: vni, bridge: s.bridge, vxlan: s.vxlan, peers: s.peers, devNS: s.devNS}
	m.dying[vni] = td
	m.mu.Unlock()
	m.reaper.do(func() { m.finish(td) })
}

// finish deletes a teardown's links, once, then its FilterTable rules:
// its VXLAN device listens until it is gone (a direct session's, in its
// container's namespace, too: the namespace may outlive its pin while a
// process holds it). Whoever calls it second waits for the first. m.mu
// is not held.
func (m *overlay) finish(td *teardown) {
	td.once.Do(func() {
		err := deleteLinks(td.vxlan, td.bridge)
		if td.devNS >= 0 {
			err = errors.Join(err, dropOverlayIn(td.devNS))
			_ = td.devNS.Close()
		}
		m.mu.Lock()
		if m.dying[td.vni] == td {
			delete(m.dying, td.vni)
		}
		m.mu.Unlock()
		if td.vxlan != "" {
			err = errors.Join(err, m.rules.syncFilter())
		}
		m.reaper.fail(err)
	})
}

// dropOverlayIn deletes Iface in namespace ns if it is a VXLAN device
// (a direct session's); anything else, or none, is left.
func dropOverlayIn(ns netns.NsHandle) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in container netns: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByName(Iface)
	if err != nil || l.Type() != "vxlan" {
		return nil
	}
	if err := h.LinkDel(l); err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting the session's VXLAN device %s: %w", Iface, err)
	}
	return nil
}

// remoteNodes are the addresses of the other nodes job spans.
func remoteNodes(job api.AssignedJob, node string, local net.IP) []net.IP {
	var out []net.IP
	seen := map[string]bool{}
	for _, c := range job.Containers {
		ip := net.ParseIP(c.NodeAddr)
		if c.Node == node || ip == nil || ip.Equal(local) || seen[ip.String()] {
			continue
		}
		seen[ip.String()] = true
		out = append(out, ip)
	}
	return out
}

// remoteContainers maps the session address of each of job's containers
// on another node to that node's address.
func remoteContainers(job api.AssignedJob, node string, local net.IP) map[string]net.IP {
	out := map[string]net.IP{}
	for _, c := range job.Containers {
		ip := net.ParseIP(c.NodeAddr)
		if c.Node == node || ip == nil || ip.Equal(local) || c.Addr == "" {
			continue
		}
		out[c.Addr] = ip
	}
	return out
}
