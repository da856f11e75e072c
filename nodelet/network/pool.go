package network

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// DefaultPool is how many prepared namespaces a nodelet keeps ready
// unless its configuration says otherwise (nodelet.hcl netns_pool).
const DefaultPool = 4

// MaxPool bounds the pool: each entry is a namespace and a veth the
// kernel holds while nobody uses them.
const MaxPool = 64

// prefixPool names the host end of a pooled namespace's default veth,
// trp<seq>, in the pool and with the container that takes it.
const prefixPool = "trp"

// pool keeps up to size fresh network namespaces ready, each pinned
// under the Manager's pool directory with loopback up and, when the node
// has a default network, a veth pair: trp<seq> on the default bridge,
// isolated from its other ports, and Iface inside, both up (setting a
// link up costs as much as the rest of a container's setup: IPv6
// autoconfiguration, carrier), with no address and no route: nothing in
// the namespace sends but the kernel's IPv6 neighbour discovery, which
// the gateway, without IPv6 on the bridge, ignores. The host end
// keeps its name in use: the container's bookkeeping (defaultNet.links)
// and, after a restart, the veth's peer index (defaultHeld) find it. A container takes one (take) instead of making its own;
// a background filler makes new ones off the containers' path. Entries
// are only ever made fresh and handed out once: a namespace a container
// used is unpinned with it (unplug) and never comes back.
type pool struct {
	dir  string // where entries are pinned: <Manager.dir>-pool
	size int

	mu      sync.Mutex
	ready   []poolEntry
	seq     uint64 // names entries: .pool-<seq>, trp<seq>
	running bool   // the filler goroutine is alive
	closed  bool
	idle    sync.Cond // signalled when the filler exits; L is mu
}

// poolEntry is one prepared namespace.
type poolEntry struct {
	path string // its pin
	host string // host end of its default veth; "" without a default network
}

// SetPool makes Cleanup start a pool of n prepared namespaces (0: none,
// the default). Call it before Cleanup.
func (m *Manager) SetPool(n int) error {
	if n < 0 || n > MaxPool {
		return fmt.Errorf("netns pool %d: want 0 to %d", n, MaxPool)
	}
	m.pool.size = n
	return nil
}

// Pooled tells how many prepared namespaces are ready now.
func (m *Manager) Pooled() int {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	return len(m.pool.ready)
}

// take hands out a prepared namespace, if one is ready. def tells
// whether the container gets the default network: entries hold a
// default veth exactly when the node has a default network, so a
// container without one (a sealed partition) on such a node gets none
// from the pool. Call refill once the container's setup is done: the
// filler then does not compete with it for the kernel's locks.
func (m *poolFiller) take(def bool) (poolEntry, bool) {
	if def != (m.def != nil) {
		return poolEntry{}, false
	}
	p := &m.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready) == 0 {
		return poolEntry{}, false
	}
	e := p.ready[0]
	p.ready = p.ready[1:]
	return e, true
}

// refill wakes the filler unless the pool is full.
func (m *poolFiller) refill() {
	m.pool.mu.Lock()
	m.fillLocked()
	m.pool.mu.Unlock()
}

// after makes the pool name its entries past name (trp<seq>), which an
// adopted container holds. Before startPool.
func (p *pool) after(name string) {
	if seq, err := strconv.ParseUint(strings.TrimPrefix(name, prefixPool), 10, 64); err == nil {
		p.mu.Lock()
		p.seq = max(p.seq, seq)
		p.mu.Unlock()
	}
}

// startPool starts filling the pool (Cleanup, once the default bridge
// is there).
func (m *poolFiller) startPool() error {
	p := &m.pool
	if p.size == 0 {
		return nil
	}
	if err := pinDir(p.dir); err != nil {
		return fmt.Errorf("netns pool: %w", err)
	}
	p.mu.Lock()
	p.closed = false
	m.fillLocked()
	p.mu.Unlock()
	return nil
}

// fillLocked starts the filler unless it runs, the pool is full or
// closed. p.mu is held.
func (m *poolFiller) fillLocked() {
	p := &m.pool
	if p.running || p.closed || p.size == 0 || len(p.ready) >= p.size {
		return
	}
	p.running = true
	go m.fill()
}

// fill prepares entries until the pool is full, one at a time. A
// failure stops it (recorded for Close, like the reaper's) until the
// next take: a node that cannot make namespaces does not spin, and its
// containers meet the error themselves on the ordinary path.
func (m *poolFiller) fill() {
	p := &m.pool
	for {
		p.mu.Lock()
		if p.closed || len(p.ready) >= p.size {
			p.running = false
			p.idle.Broadcast()
			p.mu.Unlock()
			return
		}
		p.seq++
		seq := p.seq
		p.mu.Unlock()
		e, err := m.prepare(seq)
		p.mu.Lock()
		if err == nil && p.closed {
			p.mu.Unlock()
			err = discard(e) // closed meanwhile: gone before closePool returns
			p.mu.Lock()
			if err == nil {
				p.running = false
				p.idle.Broadcast()
				p.mu.Unlock()
				return
			}
		}
		if err != nil {
			p.running = false
			p.idle.Broadcast()
			p.mu.Unlock()
			m.reaper.fail(err)
			return
		}
		p.ready = append(p.ready, e)
		p.mu.Unlock()
	}
}

// prepare makes entry seq: a fresh namespace with loopback up and, with
// a default network, its default veth pair, tuned as plug tunes one.
// Nothing in it belongs to a container yet: no address, no route, links
// down. What a failure leaves is deleted here.
func (m *poolFiller) prepare(seq uint64) (e poolEntry, err error) {
	s := strconv.FormatUint(seq, 10)
	e.path = filepath.Join(m.pool.dir, ".pool-"+s)
	if m.def != nil {
		e.host = prefixPool + s
	}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("netns pool: %w", err), discard(e))
		}
	}()
	if err := newNetNS(e.path); err != nil {
		return e, err
	}
	ns, err := netns.GetFromPath(e.path)
	if err != nil {
		return e, fmt.Errorf("opening netns: %w", err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return e, fmt.Errorf("netlink in netns: %w", err)
	}
	defer h.Close()
	up := func(name string) error {
		l, err := h.LinkByName(name)
		if err == nil {
			err = h.LinkSetUp(l)
		}
		if err != nil {
			return fmt.Errorf("%s up: %w", name, err)
		}
		return nil
	}
	if err := up("lo"); err != nil {
		return e, err
	}
	if e.host == "" {
		return e, nil
	}
	br, err := netlink.LinkByName(DefaultBridge)
	if err != nil {
		return e, fmt.Errorf("default bridge %s: %w", DefaultBridge, err)
	}
	la := oneQueue(netlink.NewLinkAttrs())
	la.Name, la.MasterIndex = e.host, br.Attrs().Index
	veth := &netlink.Veth{LinkAttrs: la, PeerName: Iface, PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		return e, fmt.Errorf("veth %s: %w", e.host, err)
	}
	if err := netlink.LinkSetIsolated(veth, true); err != nil {
		return e, fmt.Errorf("veth %s: isolating: %w", e.host, err)
	}
	noIPv6(e.host)
	if err := netlink.LinkSetUp(veth); err != nil {
		return e, fmt.Errorf("veth %s up: %w", e.host, err)
	}
	if err := up(Iface); err != nil {
		return e, err
	}
	tuneNeighbours(ns, Iface)
	return e, nil
}

// discard deletes an entry nobody took: its pin (the namespace goes with
// it, and the veth's inner end) and the host end, if still named so.
func discard(e poolEntry) error {
	var err error
	if e.host != "" {
		err = deleteLinks(e.host)
	}
	return errors.Join(err, removeNetNS(e.path))
}

// closePool stops the filler and discards every entry (Close and
// Cleanup); a later startPool fills it again.
func (m *poolFiller) closePool() error {
	p := &m.pool
	p.mu.Lock()
	p.closed = true
	for p.running {
		p.idle.Wait()
	}
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	var errs []error
	for _, e := range ready {
		errs = append(errs, discard(e))
	}
	return errors.Join(errs...)
}

// cleanupPool removes what a previous nodelet's pool left: every pin
// under the pool directory, and under the legacy directory's, which
// goes too (the links are Cleanup's, by prefix).
func (m *poolFiller) cleanupPool() error {
	errs := []error{removePins(m.pool.dir)}
	if m.legacy != "" {
		legacy := m.legacy + "-pool"
		errs = append(errs, removePins(legacy))
		_ = os.Remove(legacy) // nothing pins there any more
	}
	return errors.Join(errs...)
}

// removePins unpins every namespace pinned in dir.
func removePins(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range ents {
		errs = append(errs, removeNetNS(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// movePin pins the namespace pinned at from at to (created) too, and
// has the reaper unpin from: an unmount waits for an RCU grace period,
// a millisecond or more, which the container need not. A crash before
// leaves from to Cleanup (cleanupPool).
func (m *poolFiller) movePin(from, to string) error {
	f, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("netns pin: %w", err)
	}
	f.Close()
	if err := unix.Mount(from, to, "", unix.MS_BIND, ""); err != nil {
		_ = os.Remove(to)
		return fmt.Errorf("pinning netns: %w", err)
	}
	m.reaper.do(func() { m.reaper.fail(removeNetNS(from)) })
	return nil
}

// isPooled tells a pooled namespace's host link (trp7).
func isPooled(name string) bool {
	rest, ok := strings.CutPrefix(name, prefixPool)
	return ok && rest != "" && rest[0] >= '0' && rest[0] <= '9'
}
