package network

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

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
//
// Its roles are types of their own that reach its state through the
// Manager they embed, called through its fields: overlay makes and
// deletes a session's bridge and VXLAN device, filler keeps the pool of
// prepared namespaces, rules writes the node's nftables tables. The
// Manager's own methods are the package's API, a container's links
// (plug, unplug) and the sweep after a restart.
type Manager struct {
	overlay *overlay    // a session's bridge and VXLAN device (overlay.go)
	filler  *poolFiller // the pool of prepared namespaces (pool.go)
	rules   *ruleWriter // the filter and default tables (filter.go, reach.go)

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

	reaper reaper // deletes links off the callers' path
	pool   pool   // prepared namespaces (SetPool)
}

// overlay makes a session's links on this node, its bridge and VXLAN
// device, and deletes them when its last container leaves.
type overlay struct{ *Manager }

// poolFiller keeps the pool of prepared namespaces filled, hands them
// out, and removes them.
type poolFiller struct{ *Manager }

// ruleWriter writes the node's nftables tables: the filter of the
// sessions' VXLAN traffic, and who reaches the default network's
// containers.
type ruleWriter struct {
	*Manager
	filterMu sync.Mutex // one FilterTable update at a time; taken before mu
	tableMu  sync.Mutex // one DefaultTable update at a time; taken before mu
	// written is what the owner sets of DefaultTable hold (tableMu).
	written struct{ owner, local map[string]int }
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
	m.overlay, m.filler, m.rules = &overlay{m}, &poolFiller{m}, &ruleWriter{Manager: m}
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
