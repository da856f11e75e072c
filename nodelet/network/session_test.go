package network

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/troupe-hpc/troupe/internal/api"
)

// blockReaper holds m's background deletions until the returned func
// (also run at the test's end) lets them go.
func blockReaper(t *testing.T, m *Manager) func() {
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release) // after the hook's clearing: cleanups run last first
	setHook(t, &testHookReap, func(r *reaper) {
		if r == &m.reaper {
			<-gate
		}
	})
	return release
}

// attachAll attaches every container of job, with ids suffixed by try.
func attachAll(m *Manager, job api.AssignedJob, try int) ([]Endpoint, error) {
	var eps []Endpoint
	for _, c := range job.Containers {
		ep, err := m.Attach(job, c.Host, fmt.Sprintf("j%d-%s-%d", job.ID, c.Host, try), false)
		if err != nil {
			return nil, err
		}
		eps = append(eps, ep)
	}
	return eps, nil
}

func detachAll(t *testing.T, m *Manager, job api.AssignedJob, try int) {
	t.Helper()
	for _, c := range job.Containers {
		if err := m.Detach(job, c.Host, fmt.Sprintf("j%d-%s-%d", job.ID, c.Host, try)); err != nil {
			t.Fatal(err)
		}
	}
}

// checkSession asserts that job's session bridge is up with every
// container's veth on it, and that its first container reaches its
// last; it returns the bridge's index.
func checkSession(t *testing.T, job api.AssignedJob, eps []Endpoint, port int) int {
	t.Helper()
	vni := job.Network.VNI
	br, err := netlink.LinkByName(bridgeName(vni))
	if err != nil {
		t.Fatalf("session bridge: %v", err)
	}
	if br.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("%s is down", br.Attrs().Name)
	}
	for _, c := range job.Containers {
		v, err := netlink.LinkByName(vethName(vni, c.Rank))
		if err != nil {
			t.Fatalf("veth of %s: %v", c.Host, err)
		}
		if v.Attrs().MasterIndex != br.Attrs().Index || v.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("veth %s: master %d up %v, want on %s (%d), up", v.Attrs().Name, v.Attrs().MasterIndex,
				v.Attrs().Flags&net.FlagUp != 0, br.Attrs().Name, br.Attrs().Index)
		}
	}
	last := eps[len(eps)-1]
	addr := fmt.Sprintf("%s:%d", last.Addr, port)
	listenIn(t, last.NetNS, addr)
	if got, err := dialFrom(t, eps[0].NetNS, addr); err != nil || got != eps[0].Addr {
		t.Errorf("%s to %s on the session network: %q, %v", eps[0].Addr, addr, got, err)
	}
	return br.Attrs().Index
}

// noLeak asserts that once the background deletions are done no
// session link is left.
func noLeak(t *testing.T, m *Manager) {
	t.Helper()
	if err := m.reaper.wait(); err != nil {
		t.Errorf("background deletions: %v", err)
	}
	if links, err := Links(); err != nil || len(links) > 0 {
		t.Errorf("links left: %v, %v", links, err)
	}
}

// TestSlowTeardownDoesNotBlockSetup: session A's Detach returns while
// its links are still being deleted (held here), and session B's setup
// completes meanwhile, on a working network of its own; A's links go
// once the deletion runs, and nothing is left.
func TestSlowTeardownDoesNotBlockSetup(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	m := newDefaultManager(t, t.TempDir())
	release := blockReaper(t, m)
	a, b := testJob(1, 5101, 2), testJob(2, 5102, 2)
	if _, err := attachAll(m, a, 0); err != nil {
		t.Fatal(err)
	}
	detached := make(chan struct{})
	go func() {
		defer close(detached)
		detachAll(t, m, a, 0)
	}()
	select {
	case <-detached:
	case <-time.After(time.Minute):
		t.Fatal("A's Detach waits for its links' deletion")
	}
	if _, err := netlink.LinkByName(bridgeName(5101)); err != nil {
		t.Fatalf("A's bridge gone before its deletion was let go: %v", err)
	}
	type result struct {
		eps []Endpoint
		err error
	}
	done := make(chan result, 1)
	go func() {
		eps, err := attachAll(m, b, 0)
		done <- result{eps, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("B's setup waits for A's teardown")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, err := netlink.LinkByName(bridgeName(5101)); err != nil {
		t.Errorf("A's bridge gone while its deletion was held: %v", err)
	}
	checkSession(t, b, r.eps, 7001)
	release()
	if err := m.reaper.wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(bridgeName(5101)); !isNotFound(err) {
		t.Errorf("A's bridge after its deletion: %v", err)
	}
	detachAll(t, m, b, 0)
	noLeak(t, m)
}

// TestSessionBackWhileDying: the containers of a session come back (a
// VNI that came round again, the same names) while the deletion of its
// previous links is held: they get a fresh bridge, which the held
// deletion, let go, leaves alone; nothing is left at the end.
func TestSessionBackWhileDying(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	m := newDefaultManager(t, t.TempDir())
	job := testJob(1, 5111, 2)
	eps, err := attachAll(m, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := checkSession(t, job, eps, 7002)
	release := blockReaper(t, m)
	detachAll(t, m, job, 0)
	if eps, err = attachAll(m, job, 1); err != nil {
		t.Fatal(err)
	}
	if idx := checkSession(t, job, eps, 7003); idx == old {
		t.Errorf("the session's new containers are on its old bridge (index %d)", idx)
	}
	release()
	if err := m.reaper.wait(); err != nil {
		t.Fatal(err)
	}
	checkSession(t, job, eps, 7004) // the held deletion hit nothing new
	detachAll(t, m, job, 1)
	noLeak(t, m)
}

// TestSessionLastLeavesAsNextArrives: a session's last container leaves
// while another of the same session arrives, in either order: the
// session ends up with a working bridge, and nothing is left once all
// are gone.
func TestSessionLastLeavesAsNextArrives(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	m := newDefaultManager(t, t.TempDir())
	job := testJob(1, 5121, 2)
	main, sub := job.Containers[0], job.Containers[1]
	if _, err := attachAll(m, job, 0); err != nil {
		t.Fatal(err)
	}
	for try := 1; try <= 4; try++ {
		// sub (of the previous try) is the last left; main comes back.
		if try == 1 {
			if err := m.Detach(job, main.Host, fmt.Sprintf("j1-%s-0", main.Host)); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var derr, aerr error
		var mainEp Endpoint
		wg.Go(func() { derr = m.Detach(job, sub.Host, fmt.Sprintf("j1-%s-%d", sub.Host, try-1)) })
		wg.Go(func() { mainEp, aerr = m.Attach(job, main.Host, fmt.Sprintf("j1-%s-%d", main.Host, try), false) })
		wg.Wait()
		if err := errors.Join(derr, aerr); err != nil {
			t.Fatal(err)
		}
		subEp, err := m.Attach(job, sub.Host, fmt.Sprintf("j1-%s-%d", sub.Host, try), false)
		if err != nil {
			t.Fatal(err)
		}
		checkSession(t, job, []Endpoint{mainEp, subEp}, 7010+try)
		if try < 4 {
			if err := m.Detach(job, main.Host, fmt.Sprintf("j1-%s-%d", main.Host, try)); err != nil {
				t.Fatal(err)
			}
		} else {
			detachAll(t, m, job, try)
		}
	}
	noLeak(t, m)
}

// TestCrashWithDeletionsPending: a nodelet that dies with deletions
// pending leaves links behind; the next one's Cleanup removes them all,
// but the adopted container's (and its session's).
func TestCrashWithDeletionsPending(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	dir := t.TempDir()
	m1 := newDefaultManager(t, dir)
	blockReaper(t, m1) // m1 "dies" with its deletions held
	gone, kept := testJob(1, 5131, 2), testJob(2, 5132, 2)
	if _, err := attachAll(m1, gone, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := attachAll(m1, kept, 0); err != nil {
		t.Fatal(err)
	}
	detachAll(t, m1, gone, 0)
	// kept's sub1 left too, its veth pending; main1 stays.
	if err := m1.Detach(kept, "sub1", "j2-sub1-0"); err != nil {
		t.Fatal(err)
	}
	links, _ := Links()
	if !slices.Contains(links, bridgeName(5131)) {
		t.Fatalf("links %v: want gone's bridge still there (its deletion held)", links)
	}
	m2, err := New(dir, "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Adopt(kept, "main1", "j2-main1-0"); err != nil {
		t.Fatal(err)
	}
	if err := m2.Cleanup(); err != nil {
		t.Fatal(err)
	}
	links, _ = Links()
	slices.Sort(links)
	want := []string{bridgeName(5132), vethName(5132, 0)}
	if !slices.Equal(links, want) {
		t.Errorf("after recovery: links %v, want %v (the adopted container's)", links, want)
	}
	if err := m2.Detach(kept, "main1", "j2-main1-0"); err != nil {
		t.Fatal(err)
	}
	noLeak(t, m2)
}

// TestOverlayMTU: a session spanning nodes with two containers on this
// one (so a bridge here) takes its MTU from the node's underlay link
// less VXLAN's 50 bytes, whatever it is: 1450 on a 1500 underlay, 8950
// on a jumbo-frame one (not 1500), on its bridge, VXLAN device, veths
// and the containers' eth0. (TestDirectOverlay checks a session with
// one container here.)
func TestOverlayMTU(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	node0, err := netlink.LinkByName("node0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netlink.LinkSetMTU(node0, 1500) })
	for _, c := range []struct{ underlay, want int }{{1500, 1450}, {9000, 8950}} {
		if err := netlink.LinkSetMTU(node0, c.underlay); err != nil {
			t.Fatal(err)
		}
		m, err := New(t.TempDir(), "node1", "10.250.0.1", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Cleanup(); err != nil {
			t.Fatal(err)
		}
		job := testJob(uint64(c.underlay), 5141, 3)
		job.Containers[2].Node, job.Containers[2].NodeAddr = "node2", "10.250.0.2"
		ep, err := m.Attach(job, "main1", "main1", false)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, name := range []string{bridgeName(5141), vxlanName(5141), vethName(5141, 0)} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				t.Fatal(err)
			}
			got[name] = l.Attrs().MTU
		}
		inNS(t, ep.NetNS, func() {
			if l, err := netlink.LinkByName(Iface); err == nil {
				got[Iface] = l.Attrs().MTU
			}
		})
		for name, mtu := range got {
			if mtu != c.want {
				t.Errorf("underlay MTU %d: %s has MTU %d, want %d (all: %v)", c.underlay, name, mtu, c.want, got)
			}
		}
		if len(got) != 4 {
			t.Errorf("underlay MTU %d: links %v, want 4", c.underlay, got)
		}
		if err := m.Detach(job, "main1", "main1"); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
