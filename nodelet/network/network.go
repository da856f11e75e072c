package network

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/api"
)

// Names and numbers of the session network.
const (
	// Iface is the session interface inside every container.
	Iface = "eth0"
	// VXLANPort is the UDP port of the overlay (IANA's).
	VXLANPort = 4789
	// vxlanOverhead is what VXLAN over IPv4 adds to a frame.
	vxlanOverhead = 50

	prefixBridge = "trb"
	prefixVXLAN  = "trx"
	prefixVeth   = "trv"
	// sealedPeer is the other end of Iface in a one-container session
	// without the default network.
	sealedPeer = "eth0p"
)

// ErrNoNetwork: the job carries no session network (a schedd that
// allocates none, or a container without an address).
var ErrNoNetwork = errors.New("job has no session network")

// Manager creates and removes session networks on this node. It is safe
// for concurrent use.
//
// Its mutex guards the bookkeeping alone (which sessions have links here
// and how many containers hold them, the default addresses, the adopted
// containers), never a netlink call: one slot's teardown never stalls
// another slot's setup. Per session, the first container makes the
// links while the others make their own namespaces and default links,
// waiting on the session's ready channel only for their veth on the
// session's bridge; the last one hands them to a teardown, which deletes
// them in the background, and a new session of the same VNI deletes them
// first if the background has not yet.
type Manager struct {
	dir   string // pinned container namespaces
	node  string // this node's name in schedd
	local net.IP // VXLAN source: the node's advertised address
	mtu   int    // of the underlay link holding local
	// legacy is where an older nodelet pinned them ("": nowhere else;
	// SetLegacyDir): Adopt finds a re-attached container's pin there,
	// Cleanup sweeps it and its pool. Nothing new is pinned there.
	legacy string

	mu       sync.Mutex
	sessions map[uint32]*session  // by VNI
	dying    map[uint32]*teardown // sessions whose links are being deleted, by VNI
	adopted  map[string]bool      // container ids whose namespace Cleanup keeps
	pins     map[string]string    // adopted containers pinned in legacy: id -> pin
	kept     map[string]bool      // session veths of adopted containers: Cleanup keeps them
	def      *defaultNet          // nil: containers get no default network
	reach    Reach                // who reaches the default network's containers (SetReach)
	peers    map[int][]string     // by uid: its containers' default addresses on other nodes (SetPeers)

	filterMu sync.Mutex // one FilterTable update at a time; taken before mu
	tableMu  sync.Mutex // one DefaultTable update at a time; taken before mu
	reaper   reaper     // deletes links off the callers' path
	pool     pool       // prepared namespaces (SetPool)
	// written is what the owner sets of DefaultTable hold (tableMu).
	written struct{ owner, local map[string]int }

	// createHook, when set (tests), runs before a session's links are
	// made; an error it returns fails the session as the kernel would.
	createHook func() error
}

// session is one session's network on this node.
type session struct {
	bridge string   // "" when direct
	index  int      // the bridge's link index; 0: look it up by name (adopted)
	vxlan  string   // "" when the session is on this node only
	peers  []net.IP // the session's other nodes: the only VXLAN sources accepted
	mtu    int      // of the containers' links
	users  int      // containers attached here, or on their way
	// direct: the session has one container on this node and others
	// elsewhere, so the container's Iface is the session's VXLAN device
	// itself, made in its namespace (plug): no bridge, no veth.
	direct  bool
	remotes map[string]net.IP // containers on other nodes (remoteContainers)
	// devNS is the namespace holding a direct session's VXLAN device
	// once its container is cut off (unplug), for finish to delete it
	// from; -1 when none.
	devNS netns.NsHandle
	// ready is closed once the first container made the links; err
	// then tells whether it failed (the session left m.sessions).
	ready chan struct{}
	err   error
}

// teardown is a session whose last container left this node: its links
// are deleted once, by the reaper or by the next session of its VNI,
// whichever comes first. Until then FilterTable keeps its rules.
type teardown struct {
	vni    uint32
	bridge string
	vxlan  string
	peers  []net.IP
	devNS  netns.NsHandle // a direct session's container namespace, or -1
	once   sync.Once
}

// closed is a ready channel of a session whose links exist already.
func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// Endpoint is a container's place on its session network.
type Endpoint struct {
	NetNS string // pinned namespace path, for the runtime
	Addr  string // its address (no prefix)
	// Default is its address on the default network, "" without one.
	Default string
}

// New returns a Manager for node, pinning namespaces under dir and
// sending VXLAN from advertise. defaultSubnet is the default network's
// (DefaultSubnet, or the node's own); "": containers get none. New
// changes nothing on the node: Cleanup sets the default network up.
func New(dir, node, advertise, defaultSubnet string) (*Manager, error) {
	ip := net.ParseIP(advertise)
	if ip == nil || ip.To4() == nil {
		return nil, fmt.Errorf("session networks: advertise %q is not an IPv4 address", advertise)
	}
	m := &Manager{dir: dir, node: node, local: ip, mtu: underlayMTU(ip), sessions: map[uint32]*session{},
		dying: map[uint32]*teardown{}, adopted: map[string]bool{}, pins: map[string]string{}, kept: map[string]bool{}}
	m.reaper.idle.L = &m.reaper.mu
	m.pool.dir, m.pool.idle.L = dir+"-pool", &m.pool.mu
	if defaultSubnet != "" {
		d, err := parseDefault(defaultSubnet, ip)
		if err != nil {
			return nil, err
		}
		m.def = d
	}
	if err := pinDir(dir); err != nil {
		return nil, err
	}
	return m, nil
}

// pinDir makes dir, where namespaces are pinned (0700), or checks the
// one there: a directory, not a symbolic link, of the nodelet's user,
// which no other user may write (a pin is made, bind-mounted on and
// handed to the runtime by path).
func pinDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("session networks: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("session networks: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("session networks: pin directory %s is not a directory", dir)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("session networks: pin directory %s belongs to uid %d, want %d", dir, st.Uid, os.Geteuid())
	case st.Mode&0o022 != 0:
		return fmt.Errorf("session networks: pin directory %s has mode %#o: others may write it (want 0700)", dir, st.Mode&0o777)
	}
	return nil
}

// SetLegacyDir names where an older nodelet pinned its containers'
// namespaces (and, under <dir>-pool, its pool), when that is not the
// Manager's own directory: containers it left running are adopted with
// their pins where they are, Cleanup removes the others, and the
// directories go once empty. Call it before Adopt and Cleanup.
func (m *Manager) SetLegacyDir(dir string) {
	if dir != "" && filepath.Clean(dir) == filepath.Clean(m.dir) {
		dir = ""
	}
	m.legacy = dir
}

// private tells whether job's containers share a session bridge: those
// of a session of one container need none (its session address sits on
// its own interface).
func private(job api.AssignedJob) bool { return len(job.Containers) > 1 }

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

func bridgeName(vni uint32) string { return prefixBridge + strconv.FormatUint(uint64(vni), 10) }
func vxlanName(vni uint32) string  { return prefixVXLAN + strconv.FormatUint(uint64(vni), 10) }
func vethName(vni uint32, rank int) string {
	return prefixVeth + strconv.FormatUint(uint64(vni), 10) + "-" + strconv.Itoa(rank)
}

// nsPath is where Attach pins container id's namespace.
func (m *Manager) nsPath(id string) string { return filepath.Join(m.dir, id) }

// pinOf is where container id's namespace is pinned: nsPath, or for a
// container adopted from an older nodelet, where that one pinned it.
func (m *Manager) pinOf(id string) string {
	m.mu.Lock()
	p, ok := m.pins[id]
	m.mu.Unlock()
	if ok {
		return p
	}
	return m.nsPath(id)
}

// Attach puts job's container host on the session network: the
// session's bridge (and overlay) on this node when it is the first, a
// new namespace named id, and a veth into it (Iface) with the
// container's address. With egress, and a default network on this node,
// it also gets a veth on the default bridge (DefaultIface) and the
// default route through it. A session of one container gets no bridge:
// its session address sits on its default-network interface, then
// named Iface, or, without egress, on an Iface of its own. A direct
// session (one container here, others elsewhere) gets neither bridge
// nor veth: the container's Iface is the session's VXLAN device. Undo
// it with Detach, after the container's processes are gone.
func (m *Manager) Attach(job api.AssignedJob, host, id string, egress bool) (_ Endpoint, err error) {
	c, ok := container(job, host)
	if !ok || job.Network == nil || c.Addr == "" {
		return Endpoint{}, fmt.Errorf("job %d %s: %w", job.ID, host, ErrNoNetwork)
	}
	_, subnet, err := net.ParseCIDR(job.Network.Subnet)
	ip := net.ParseIP(c.Addr).To4()
	if err != nil || ip == nil || !subnet.Contains(ip) {
		return Endpoint{}, fmt.Errorf("job %d %s: address %q not in subnet %q", job.ID, host, c.Addr, job.Network.Subnet)
	}
	vni := job.Network.VNI
	var s *session
	if private(job) {
		if s, err = m.acquire(job); err != nil {
			return Endpoint{}, fmt.Errorf("session network of job %d: %w", job.ID, err)
		}
	}
	if s != nil {
		// A failed Attach lets go of this session, not of another of the
		// same VNI made since.
		defer func() {
			if err != nil {
				m.drop(vni, s)
			}
		}()
	}
	ep := Endpoint{NetNS: m.nsPath(id), Addr: c.Addr}
	var def *net.IPNet
	n := uint32(0)
	if egress && m.def != nil {
		m.mu.Lock()
		n, err = m.def.alloc(id)
		if err == nil {
			m.def.owners[id] = job.UID
		}
		m.mu.Unlock()
		if err != nil {
			return Endpoint{}, fmt.Errorf("job %d %s: %w", job.ID, host, err)
		}
		def = &net.IPNet{IP: m.def.addr(n), Mask: m.def.subnet.Mask}
		ep.Default = def.IP.String()
	}
	hostEnd, err := m.plug(s, vni, c.Rank, ep.NetNS, &net.IPNet{IP: ip, Mask: subnet.Mask}, def, n)
	if err != nil {
		_ = m.unplug(id, vni, c.Rank)
		return Endpoint{}, fmt.Errorf("job %d %s: %w", job.ID, host, err)
	}
	if def != nil && hostEnd != defaultVeth(n) {
		m.mu.Lock()
		m.def.links[id] = hostEnd
		m.mu.Unlock()
	}
	if def != nil {
		// Its address joins its user's set before it runs: the same
		// user's containers reach it, no other user's.
		if err := m.syncOwners(); err != nil {
			_ = m.unplug(id, vni, c.Rank)
			return Endpoint{}, fmt.Errorf("job %d %s: %w", job.ID, host, err)
		}
	}
	return ep, nil
}

// Detach removes what Attach made for the container, and the session's
// links with its last container on this node. The container is cut off
// at once (its links down, its namespace unpinned); the links themselves
// are deleted in the background, off the caller's path (the kernel
// takes ~30 ms to delete a veth, ~50 ms a bridge). A crash before that
// leaves them to the next nodelet's Cleanup.
func (m *Manager) Detach(job api.AssignedJob, host, id string) error {
	c, ok := container(job, host)
	if !ok || job.Network == nil {
		return nil
	}
	err := m.unplug(id, job.Network.VNI, c.Rank)
	m.mu.Lock()
	_, legacy := m.pins[id]
	delete(m.adopted, id)
	delete(m.pins, id)
	m.mu.Unlock()
	if legacy {
		_ = os.Remove(m.legacy) // with the older nodelet's last container
	}
	m.release(job.Network.VNI)
	return err
}

// acquire returns the session's network on this node, creating it for
// the first container. The others do not wait for it here: they make
// their own namespace and default links meanwhile, and wait on s.ready
// (plug) only to put their veth on the session's bridge. m.mu is not
// held.
func (m *Manager) acquire(job api.AssignedJob) (*session, error) {
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
	if m.createHook != nil {
		err = m.createHook()
	}
	// The filter first: the VXLAN device takes no frame from a host
	// outside the session from the moment it exists.
	if err == nil && s.vxlan != "" {
		err = m.syncFilter()
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
			_ = m.syncFilter()
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
func (m *Manager) newSession(job api.AssignedJob, direct bool) *session {
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
func (m *Manager) create(s *session, vni uint32) error {
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
func (m *Manager) drop(vni uint32, s *session) {
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
func (m *Manager) vxlanDevice(h *netlink.Handle, la netlink.LinkAttrs, vni uint32, s *session) error {
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
func (m *Manager) release(vni uint32) {
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
func (m *Manager) finish(td *teardown) {
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
			err = errors.Join(err, m.syncFilter())
		}
		m.reaper.fail(err)
	})
}

// plug makes the container's namespace and its links: with s, a veth
// pair, Iface inside with addr, the other end on the session's bridge;
// with def, a veth pair with def inside (DefaultIface, or Iface with
// addr too when there is no s) and the other end, trd<n>, on the default
// bridge, isolated from its other ports; with neither, a bridge of its
// own as Iface, for addr alone: a veth pair whose both ends stay in the
// namespace (a veth costs a fraction of a bridge to make and to delete,
// and a dummy link is not in every kernel). It returns the name of the
// default veth's host end.
//
// The container's own links and its default network come first: in a
// session, only the veth on the session's bridge waits for the bridge,
// which the session's first container makes meanwhile (acquire).
//
// The namespace, its loopback and its default veth pair come from the
// pool when one is ready (pool.go): then only the addresses, the route
// and the session's veth are the container's to make, and the default
// veth keeps its pool name, trp<seq> (renaming a link costs an RCU grace
// period, as long as making the veth).
func (m *Manager) plug(s *session, vni uint32, rank int, nsPath string, addr, def *net.IPNet, n uint32) (hostEnd string, err error) {
	if def != nil {
		hostEnd = defaultVeth(n)
	}
	_ = removeNetNS(nsPath)
	e, pooled := m.take(def != nil)
	defer m.refill()
	if pooled {
		if err := m.movePin(e.path, nsPath); err != nil {
			return "", errors.Join(err, discard(e))
		}
		if def != nil {
			hostEnd = e.host
			// unplug, after Attach fails, knows it by defaultVeth(n).
			defer func() {
				if err != nil {
					_ = deleteLinks(e.host)
				}
			}()
		}
	} else if err := newNetNS(nsPath); err != nil {
		return "", err
	}
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return "", fmt.Errorf("opening netns: %w", err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return "", fmt.Errorf("netlink in container netns: %w", err)
	}
	defer h.Close()
	defIface := DefaultIface
	if s == nil {
		defIface = Iface
	}
	if pooled && def != nil && s != nil {
		// The pooled default veth is Iface inside: the session's takes
		// that name. (A link is renamed down; up() sets it up again.)
		l, err := h.LinkByName(Iface)
		if err == nil {
			err = h.LinkSetDown(l)
		}
		if err == nil {
			err = h.LinkSetName(l, DefaultIface)
		}
		if err != nil {
			return "", fmt.Errorf("pooled %s to %s: %w", Iface, DefaultIface, err)
		}
	}
	if s != nil && s.direct {
		la := netlink.NewLinkAttrs()
		la.Name, la.MTU, la.HardwareAddr, la.Namespace = Iface, s.mtu, containerMAC(addr.IP), netlink.NsFd(int(ns))
		if err := m.vxlanDevice(h, la, vni, s); err != nil {
			// Not expected of any kernel with VXLAN (a device made in
			// another namespace than its socket's is as old as
			// namespaces), but the bridge works wherever VXLAN does.
			if l, lerr := h.LinkByName(Iface); lerr == nil && l.Type() == "vxlan" {
				_ = h.LinkDel(l)
			}
			slog.Warn("session network: no VXLAN device in the container's namespace; falling back to a bridge and a veth",
				"vni", vni, "err", err)
			m.mu.Lock()
			s.direct, s.bridge = false, bridgeName(vni)
			m.mu.Unlock()
			if err := m.create(s, vni); err != nil {
				return "", err
			}
		}
	}
	if def != nil && !pooled {
		br, err := netlink.LinkByName(DefaultBridge)
		if err != nil {
			return "", fmt.Errorf("default bridge %s: %w", DefaultBridge, err)
		}
		// On the default bridge, down until isolated.
		if err := addVeth(veth{name: hostEnd, master: br.Attrs().Index, peer: defIface, peerNS: int(ns)}); err != nil {
			return "", err
		}
		l, err := netlink.LinkByName(hostEnd)
		if err != nil {
			return "", fmt.Errorf("veth %s: %w", hostEnd, err)
		}
		// No frame from one port to another: containers on the default
		// network reach the gateway only.
		if err := netlink.LinkSetIsolated(l, true); err != nil {
			return "", fmt.Errorf("veth %s: isolating: %w", hostEnd, err)
		}
		noIPv6(hostEnd)
		if err := netlink.LinkSetUp(l); err != nil {
			return "", err
		}
	}
	// up gives the link name its addresses and sets it up.
	up := func(name string, addrs ...*net.IPNet) (netlink.Link, error) {
		l, err := h.LinkByName(name)
		if err != nil {
			return nil, fmt.Errorf("%s in container netns: %w", name, err)
		}
		for _, a := range addrs {
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: a}); err != nil {
				return nil, fmt.Errorf("address %s on %s: %w", a, name, err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return nil, fmt.Errorf("%s up: %w", name, err)
		}
		return l, nil
	}
	if s == nil && def == nil {
		la := oneQueue(netlink.NewLinkAttrs())
		la.Name = Iface
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: sealedPeer}); err != nil {
			return "", fmt.Errorf("%s in container netns: %w", Iface, err)
		}
		if _, err := up(sealedPeer); err != nil {
			return "", err
		}
	}
	if !pooled {
		if err := h.LinkSetUp(loopback); err != nil {
			return "", fmt.Errorf("lo up: %w", err)
		}
	}
	if def != nil {
		addrs := []*net.IPNet{def}
		if s == nil {
			addrs = append(addrs, &net.IPNet{IP: addr.IP, Mask: net.CIDRMask(32, 32)})
		}
		l, err := up(defIface, addrs...)
		if err != nil {
			return "", err
		}
		gw := m.def.gateway().IP
		if err := h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw}); err != nil {
			return "", fmt.Errorf("default route via %s: %w", gw, err)
		}
	}
	if s != nil && !s.direct {
		// The session's bridge, which its first container makes while
		// the others got this far.
		if <-s.ready; s.err != nil {
			return "", fmt.Errorf("session network: %w", s.err)
		}
		index := s.index
		if index == 0 {
			br, err := netlink.LinkByName(s.bridge)
			if err != nil {
				return "", fmt.Errorf("bridge %s: %w", s.bridge, err)
			}
			index = br.Attrs().Index
		}
		if err := addVeth(veth{name: vethName(vni, rank), master: index, mtu: s.mtu, up: true,
			peer: Iface, peerNS: int(ns), mac: containerMAC(addr.IP)}); err != nil {
			return "", err
		}
	}
	if s != nil || def == nil {
		if _, err := up(Iface, addr); err != nil {
			return "", err
		}
	}
	// A pooled default veth was tuned in the pool. A direct session's
	// device gets GRO off: its segments arrive whole (the sender's GSO,
	// or the node's NIC's GRO), so the device's GRO cell only adds a
	// pass over each; the kernel's backlog is cheaper (BenchmarkVXLAN,
	// docs/network.md).
	if !pooled || s != nil {
		groOff := ""
		if s != nil && s.direct {
			groOff = Iface
		}
		if err := tuneLinks(ns, groOff, Iface, DefaultIface); err != nil {
			slog.Warn("session network: the kernel refused to turn GRO off on a container's VXLAN device; it keeps GRO",
				"vni", vni, "err", err)
		}
	}
	return hostEnd, nil
}

// unplug cuts container id off at once: its session veth (a direct
// session's VXLAN device, which the session's teardown deletes through
// the namespace handle unplug leaves it) and its default veth down (so
// that a process that outlived the container has no way out either),
// its namespace unpinned; then frees its default
// address and has the reaper delete the veths (their peers go with
// them). The veths are found now and deleted by index: a container that
// gets the same names meanwhile (the same rank of the same session, the
// same default address, which comes back only after the whole default
// subnet was handed out) is never hit. m.mu is not held.
func (m *Manager) unplug(id string, vni uint32, rank int) (err error) {
	m.mu.Lock()
	var names []string
	s := m.sessions[vni]
	if s != nil && !s.direct {
		names = append(names, vethName(vni, rank))
	}
	direct := s != nil && s.direct
	m.mu.Unlock()
	pin := m.pinOf(id)
	if direct {
		// The session's VXLAN device is the container's Iface: down
		// now, deleted with the session (finish) from the namespace,
		// which its pin no longer names by then.
		if ns, nerr := netns.GetFromPath(pin); nerr == nil {
			err = errors.Join(err, setDownIn(ns, Iface))
			m.mu.Lock()
			if s.devNS >= 0 {
				_ = s.devNS.Close()
			}
			s.devNS = ns
			m.mu.Unlock()
		}
	}
	m.mu.Lock()
	if m.def != nil {
		if _, ok := m.def.ports[id]; ok {
			names = append(names, m.def.link(id))
		}
	}
	m.mu.Unlock()
	var links []netlink.Link
	for _, name := range names {
		l, lerr := netlink.LinkByName(name)
		if lerr != nil {
			if !isNotFound(lerr) {
				err = errors.Join(err, lerr)
			}
			continue
		}
		if lerr := netlink.LinkSetDown(l); lerr != nil && !isNotFound(lerr) {
			err = errors.Join(err, fmt.Errorf("%s down: %w", name, lerr))
		}
		links = append(links, l)
	}
	err = errors.Join(err, removeNetNS(pin))
	if m.def != nil {
		// Its address stays in the owner sets (syncOwners) until
		// another container takes it: nothing holds it meanwhile, and
		// deleting set elements costs the kernel an RCU grace period.
		m.mu.Lock()
		m.def.free(id)
		m.mu.Unlock()
	}
	if len(links) > 0 {
		m.reaper.do(func() {
			for _, l := range links {
				if err := netlink.LinkDel(l); err != nil && !isNotFound(err) {
					m.reaper.fail(fmt.Errorf("deleting %s: %w", l.Attrs().Name, err))
				}
			}
		})
	}
	return err
}

// Adopt takes over the network a previous nodelet attached container id
// (job's host) to, as if Attach had made it here: Detach undoes it, and
// Cleanup keeps it and its session's links. Call it before Cleanup.
func (m *Manager) Adopt(job api.AssignedJob, host, id string) error {
	c, ok := container(job, host)
	if !ok || job.Network == nil || c.Addr == "" {
		return fmt.Errorf("job %d %s: %w", job.ID, host, ErrNoNetwork)
	}
	pin, err := m.findPin(id)
	if err != nil {
		return fmt.Errorf("job %d %s: pinned namespace: %w", job.ID, host, err)
	}
	vni := job.Network.VNI
	n, hostEnd, hasDefault := uint32(0), "", false
	if m.def != nil {
		if n, hostEnd, hasDefault, err = m.defaultHeld(pin); err != nil {
			return fmt.Errorf("job %d %s: %w", job.ID, host, err)
		}
	}
	_, berr := netlink.LinkByName(bridgeName(vni))
	m.mu.Lock()
	if hasDefault {
		m.def.used[n], m.def.ports[id] = true, n
		m.def.owners[id] = job.UID
		if hostEnd != "" && hostEnd != defaultVeth(n) {
			m.def.links[id] = hostEnd
		}
	}
	m.adopted[id] = true
	if pin != m.nsPath(id) {
		m.pins[id] = pin
	}
	if !private(job) && isNotFound(berr) {
		m.mu.Unlock()
		return nil // one container, no bridge (one from an older nodelet is kept)
	}
	s := m.sessions[vni]
	if s == nil {
		// Direct unless an older nodelet gave it a bridge.
		s = m.newSession(job, isNotFound(berr))
		s.ready = closed()
		m.sessions[vni] = s
	}
	if !s.direct {
		m.kept[vethName(vni, c.Rank)] = true
	}
	s.users++
	overlay := s.vxlan != ""
	m.mu.Unlock()
	if overlay {
		if err := m.syncFilter(); err != nil {
			return fmt.Errorf("job %d %s: %w", job.ID, host, err)
		}
	}
	return nil
}

// findPin is where a previous nodelet pinned container id's namespace:
// where this one would, or else in the legacy directory.
func (m *Manager) findPin(id string) (string, error) {
	p := m.nsPath(id)
	_, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) && m.legacy != "" {
		lp := filepath.Join(m.legacy, id)
		if _, lerr := os.Stat(lp); lerr == nil {
			return lp, nil
		}
	}
	return p, err
}

// defaultHeld tells the default host number the namespace pinned at pin
// holds, if any, and the name of its veth's host end (its
// peer's, found by index: trd<n>, or trp<seq> when it came from the
// pool; "" when not found).
func (m *Manager) defaultHeld(pin string) (uint32, string, bool, error) {
	ns, err := netns.GetFromPath(pin)
	if err != nil {
		return 0, "", false, fmt.Errorf("opening netns: %w", err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return 0, "", false, fmt.Errorf("netlink in container netns: %w", err)
	}
	defer h.Close()
	addrs, err := h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return 0, "", false, fmt.Errorf("addresses in container netns: %w", err)
	}
	for _, a := range addrs {
		n, ok := m.def.host(a.IP)
		if !ok {
			continue
		}
		hostEnd := ""
		if l, err := h.LinkByIndex(a.LinkIndex); err == nil && l.Attrs().ParentIndex > 0 {
			if p, err := netlink.LinkByIndex(l.Attrs().ParentIndex); err == nil && isOurs(p.Attrs().Name) {
				hostEnd = p.Attrs().Name
			}
		}
		return n, hostEnd, true, nil
	}
	return 0, "", false, nil
}

// Cleanup removes every session link and pinned namespace a previous
// nodelet left on this node, but those of adopted containers and their
// sessions. Call it before the first Attach, after the runtime's own
// cleanup has killed the old containers.
func (m *Manager) Cleanup() error {
	rerr := errors.Join(m.closePool(), m.reaper.wait()) // nothing of this nodelet's own in flight
	m.mu.Lock()
	keep := m.keptLinks()
	adopted := maps.Clone(m.adopted)
	m.mu.Unlock()
	links, err := linkList()
	if err != nil {
		return fmt.Errorf("listing links: %w", err)
	}
	errs := []error{rerr}
	for _, l := range links {
		n := l.Attrs().Name
		if keep[n] && isPooled(n) {
			m.pool.after(n) // an adopted container's: the pool names past it
		}
		if isOurs(n) && !keep[n] {
			if err := netlink.LinkDel(l); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting %s: %w", n, err))
			}
		}
	}
	errs = append(errs, sweepPins(m.dir, adopted))
	if m.legacy != "" {
		errs = append(errs, sweepPins(m.legacy, adopted))
	}
	// A previous nodelet's pool: never handed to a container, never
	// taken over (its host ends went with the links above).
	errs = append(errs, m.cleanupPool())
	if m.legacy != "" {
		// Gone once empty: the older nodelet's last adopted container
		// takes the other (Detach).
		_ = os.Remove(m.legacy)
	}
	// The filter of the adopted sessions only (none: no table).
	errs = append(errs, m.syncFilter())
	if m.def != nil {
		errs = append(errs, m.setupDefault())
	} else {
		errs = append(errs, m.closeDefault()) // a previous configuration's
	}
	errs = append(errs, m.startPool())
	return errors.Join(errs...)
}

// sweepPins unpins every namespace pinned in dir but those of the
// adopted containers.
func sweepPins(dir string, adopted map[string]bool) error {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var errs []error
	for _, e := range ents {
		if !adopted[e.Name()] {
			// A direct session's VXLAN device first: it holds its VNI
			// until the namespace goes, after its last process.
			p := filepath.Join(dir, e.Name())
			if ns, err := netns.GetFromPath(p); err == nil {
				errs = append(errs, dropOverlayIn(ns))
				_ = ns.Close()
			}
			errs = append(errs, removeNetNS(p))
		}
	}
	return errors.Join(errs...)
}

// Close discards the pool, waits for the links being deleted in the
// background, then removes the node's default network (its bridge and filter table) at a
// clean shutdown, once every container is detached. A nodelet that
// leaves its containers running does not call it. Its error includes
// the background deletions' that failed.
func (m *Manager) Close() error {
	err := errors.Join(m.closePool(), m.reaper.wait())
	_ = os.Remove(m.pool.dir) // empty now; absent without a pool
	if m.def == nil {
		return err
	}
	return errors.Join(err, m.closeDefault())
}

// keptLinks are the links Cleanup keeps: adopted sessions' bridge and
// VXLAN, adopted containers' session veths and default veths (not those
// of the containers that left before a crash, their deletion pending).
// m.mu is held.
func (m *Manager) keptLinks() map[string]bool {
	keep := maps.Clone(m.kept)
	if m.def != nil {
		for id := range m.def.ports {
			keep[m.def.link(id)] = true
		}
	}
	for vni := range m.sessions {
		keep[bridgeName(vni)], keep[vxlanName(vni)] = true, true
	}
	return keep
}

// isOurs tells troupe's per-session, per-container and pooled link
// names (trb4096, trx4096, trv4096-2, trd17, trp3), not DefaultBridge.
func isOurs(name string) bool {
	for _, p := range []string{prefixBridge, prefixVXLAN, prefixVeth, prefixDefault, prefixPool} {
		rest, ok := strings.CutPrefix(name, p)
		if ok && rest != "" && rest[0] >= '0' && rest[0] <= '9' {
			return true
		}
	}
	return false
}

// oneQueue gives a veth's ends (the peer takes its end's) one transmit
// and one receive queue. Without them the kernel makes a veth end with
// a queue per possible CPU, with its sysfs entries, and then, still
// holding the RTNL lock every other link change on the node waits for,
// cuts the queues in use to one and waits for an RCU grace period
// (veth_init_queues): with many containers starting at once, every one
// of them queues behind it. One queue is what a veth uses anyway.
func oneQueue(la netlink.LinkAttrs) netlink.LinkAttrs {
	la.NumTxQueues, la.NumRxQueues = 1, 1
	return la
}

// addLink adds l; a link of the same name that is still there (a
// container's that the reaper has not deleted yet, or a crash's) is
// deleted first and the add tried again. Looking for it before every
// add would cost every container a request under the kernel's RTNL lock.
func addLink(l netlink.Link) error {
	err := netlink.LinkAdd(l)
	if errors.Is(err, unix.EEXIST) {
		if derr := deleteLinks(l.Attrs().Name); derr != nil {
			return errors.Join(err, derr)
		}
		err = netlink.LinkAdd(l)
	}
	return err
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

// setDownIn sets link name in namespace ns down; a missing one is no
// error.
func setDownIn(ns netns.NsHandle, name string) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in container netns: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return nil
	}
	if err := h.LinkSetDown(l); err != nil && !isNotFound(err) {
		return fmt.Errorf("%s down: %w", name, err)
	}
	return nil
}

// linkList lists the links of the calling thread's namespace. A dump
// the kernel interrupted because links changed meanwhile (as they do
// while namespaces unpinned a moment ago die in the background,
// deleting their veths' peers here) is taken again, a few times.
func linkList() ([]netlink.Link, error) {
	for try := 0; ; try++ {
		links, err := netlink.LinkList()
		if !errors.Is(err, netlink.ErrDumpInterrupted) || try == 4 {
			return links, err
		}
	}
}

// deleteLinks deletes the named links; missing ones are no error.
func deleteLinks(names ...string) error {
	var errs []error
	for _, n := range names {
		if n == "" {
			continue
		}
		l, err := netlink.LinkByName(n)
		if err != nil {
			if !isNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		if err := netlink.LinkDel(l); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT)
}

func container(job api.AssignedJob, host string) (api.Container, bool) {
	for _, c := range job.Containers {
		if c.Host == host {
			return c, true
		}
	}
	return api.Container{}, false
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

// Links lists the names of the session and container links on this
// node (not the pool's, which belong to no container), for tests and
// diagnostics.
func Links() ([]string, error) {
	links, err := linkList()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range links {
		if n := l.Attrs().Name; isOurs(n) && !isPooled(n) {
			out = append(out, n)
		}
	}
	return out, nil
}
