package network

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/troupe-hpc/troupe/internal/api"
)

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
		s = m.overlay.newSession(job, isNotFound(berr))
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
		if err := m.rules.syncFilter(); err != nil {
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
	rerr := errors.Join(m.filler.closePool(), m.reaper.wait()) // nothing of this nodelet's own in flight
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
	errs = append(errs, m.filler.cleanupPool())
	if m.legacy != "" {
		// Gone once empty: the older nodelet's last adopted container
		// takes the other (Detach).
		_ = os.Remove(m.legacy)
	}
	// The filter of the adopted sessions only (none: no table).
	errs = append(errs, m.rules.syncFilter())
	if m.def != nil {
		errs = append(errs, m.setupDefault())
	} else {
		errs = append(errs, m.closeDefault()) // a previous configuration's
	}
	errs = append(errs, m.filler.startPool())
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
	err := errors.Join(m.filler.closePool(), m.reaper.wait())
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
