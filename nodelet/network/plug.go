package network

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

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
	e, pooled := m.filler.take(def != nil)
	defer m.filler.refill()
	if pooled {
		if err := m.filler.movePin(e.path, nsPath); err != nil {
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
		if err := m.overlay.vxlanDevice(h, la, vni, s); err != nil {
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
			if err := m.overlay.create(s, vni); err != nil {
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
