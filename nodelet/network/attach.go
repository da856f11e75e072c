package network

import (
	"fmt"
	"net"
	"os"

	"github.com/troupe-hpc/troupe/internal/api"
)

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
		if s, err = m.overlay.acquire(job); err != nil {
			return Endpoint{}, fmt.Errorf("session network of job %d: %w", job.ID, err)
		}
	}
	if s != nil {
		// A failed Attach lets go of this session, not of another of the
		// same VNI made since.
		defer func() {
			if err != nil {
				m.overlay.drop(vni, s)
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
		if err := m.rules.syncOwners(); err != nil {
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
	m.overlay.release(job.Network.VNI)
	return err
}
