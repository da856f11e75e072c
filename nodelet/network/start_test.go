package network

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/troupe-hpc/troupe/internal/eventually"
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

// defaultReady tells whether the namespace pinned at path holds
// DefaultIface, up, with an address: the container's default network is
// set up.
func defaultReady(path string) bool {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return false
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return false
	}
	defer h.Close()
	l, err := h.LinkByName(DefaultIface)
	if err != nil || l.Attrs().Flags&net.FlagUp == 0 {
		return false
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	return err == nil && len(addrs) > 0
}

// TestOthersSetUpWhileBridgeIsMade: while a session's first container
// makes the session's bridge (held here), the session's other container
// makes its namespace and its default network meanwhile, and waits only
// to put its veth on the bridge; once the bridge is let go both are on a
// working session network.
func TestOthersSetUpWhileBridgeIsMade(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	m := newDefaultManager(t, t.TempDir())
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	setHook(t, &testHookCreate, func(h *Manager) error {
		if h == m {
			entered <- struct{}{}
			<-gate
		}
		return nil
	})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	job := testJob(1, 5501, 2)
	type result struct {
		ep  Endpoint
		err error
	}
	results := []chan result{make(chan result, 1), make(chan result, 1)}
	for i, c := range job.Containers {
		id := "j1-" + c.Host
		go func() {
			ep, err := m.Attach(job, c.Host, id, true)
			results[i] <- result{ep, err}
		}()
		t.Cleanup(func() { _ = m.Detach(job, c.Host, id) })
		if i == 0 {
			select { // main1 makes the bridge, and is held there
			case <-entered:
			case <-time.After(time.Minute):
				t.Fatal("main1 did not start making the session's bridge")
			}
		}
	}
	sub := m.nsPath("j1-" + job.Containers[1].Host)
	eventually.True(t, time.Minute, "sub1 making its namespace with its default network while main1 makes the session's bridge",
		func() bool { return defaultReady(sub) })
	if _, err := netlink.LinkByName(vethName(5501, 1)); !isNotFound(err) {
		t.Errorf("sub1's session veth before the session's bridge: %v", err)
	}
	select {
	case r := <-results[1]:
		t.Fatalf("sub1's Attach returned before the session's bridge was made: %+v", r)
	default:
	}
	release()
	var eps []Endpoint
	for i, c := range job.Containers {
		select {
		case r := <-results[i]:
			if r.err != nil {
				t.Fatalf("%s: %v", c.Host, r.err)
			}
			eps = append(eps, r.ep)
		case <-time.After(time.Minute):
			t.Fatalf("%s: Attach did not return once the bridge was let go", c.Host)
		}
	}
	checkSession(t, job, eps, 7501)
}

// TestSessionFailureReachesAll: when the session's bridge cannot be
// made, every container of the session fails its Attach, those that got
// on with their own setup meanwhile included (none waits forever), and
// nothing of them is left; the session sets up again afterwards.
func TestSessionFailureReachesAll(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	m := newDefaultManager(t, t.TempDir())
	job := testJob(1, 5601, 3)
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	var failing atomic.Bool
	failing.Store(true)
	setHook(t, &testHookCreate, func(h *Manager) error {
		if h != m || !failing.Load() {
			return nil
		}
		entered <- struct{}{}
		<-gate
		return errors.New("no bridge today")
	})
	errs := make(chan error, len(job.Containers))
	for i, c := range job.Containers {
		go func() {
			_, err := m.Attach(job, c.Host, "j1-"+c.Host, true)
			errs <- err
		}()
		if i == 0 {
			<-entered
		}
	}
	for _, c := range job.Containers[1:] {
		path := m.nsPath("j1-" + c.Host)
		eventually.True(t, time.Minute, c.Host+" making its namespace while main1 makes the session's bridge",
			func() bool { return defaultReady(path) })
	}
	close(gate)
	for range job.Containers {
		select {
		case err := <-errs:
			if err == nil || !strings.Contains(err.Error(), "no bridge today") {
				t.Errorf("Attach of the failed session: %v, want the bridge's error", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("an Attach of the failed session did not return")
		}
	}
	m.mu.Lock()
	left, ports := len(m.sessions), len(m.def.ports)
	m.mu.Unlock()
	if left != 0 || ports != 0 {
		t.Errorf("after the failure: %d sessions, %d default addresses held; want none", left, ports)
	}
	noLeak(t, m)
	if ents, _ := os.ReadDir(m.dir); len(ents) > 0 {
		t.Errorf("namespaces still pinned: %v", ents)
	}

	failing.Store(false)
	eps, err := attachAll(m, job, 1)
	if err != nil {
		t.Fatalf("the session again: %v", err)
	}
	checkSession(t, job, eps, 7601)
	detachAll(t, m, job, 1)
	noLeak(t, m)
}
