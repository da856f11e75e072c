package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The default network: one bridge per node, a veth per container, NAT
// out of the node.
const (
	// DefaultBridge is the node's default-network bridge; it holds the
	// gateway, the first address of the default subnet.
	DefaultBridge = "trdefault"
	// DefaultIface is the default-network interface of a container that
	// also has a session network (eth0). A one-container session has no
	// session bridge: its eth0 is the default network and carries the
	// session address too.
	DefaultIface = "eth1"
	// DefaultSubnet is the default network's subnet when the node's
	// configuration names none. Every node uses the same one: its
	// addresses never leave the node (NAT).
	DefaultSubnet = "10.199.0.0/16"
	// DefaultTable is the nftables table (family inet) of the default
	// network: masquerade out of the node, nothing in from outside but
	// answers, nothing between containers, nothing to the node itself.
	DefaultTable = "troupe-default"

	prefixDefault = "trd" // host end of a container's default veth: trd<index>
)

// SessionRange holds every session subnet schedd allocates (a /24 each,
// sched/state/network.go); the default subnet must stay out of it.
var SessionRange = &net.IPNet{IP: net.IPv4(10, 64, 0, 0).To4(), Mask: net.CIDRMask(10, 32)}

// ErrDefaultSubnet: the configured default subnet cannot be used.
var ErrDefaultSubnet = errors.New("default network subnet")

// defaultNet is the node's default network: its subnet and which host
// numbers in it containers hold.
type defaultNet struct {
	subnet *net.IPNet
	base   uint32            // the subnet's first address
	size   uint32            // addresses in the subnet
	next   uint32            // where the next allocation starts looking
	ports  map[string]uint32 // container id → host number (its address is base+n)
	// owners: container id → uid of its job's user (reachRules)
	owners map[string]int
	// links: container id → host end of its veth, when not defaultVeth
	// of its number (trp<seq>: from the pool, pool.go).
	links map[string]string
	used  map[uint32]bool
}

// CheckDefaultSubnet tells whether subnet can be a default network's:
// an IPv4 CIDR from /8 to /29 outside SessionRange (New also checks it
// does not hold the node's address).
func CheckDefaultSubnet(subnet string) error {
	_, err := parseDefault(subnet, nil)
	return err
}

// parseDefault checks subnet for the default network of a node that
// advertises local.
func parseDefault(subnet string, local net.IP) (*defaultNet, error) {
	ip, n, err := net.ParseCIDR(subnet)
	if err != nil || ip.To4() == nil {
		return nil, fmt.Errorf("%w %q: not an IPv4 CIDR", ErrDefaultSubnet, subnet)
	}
	ones, bits := n.Mask.Size()
	if bits != 32 || ones > 29 || ones < 8 {
		return nil, fmt.Errorf("%w %q: want a prefix between /8 and /29", ErrDefaultSubnet, subnet)
	}
	if n.Contains(SessionRange.IP) || SessionRange.Contains(n.IP) {
		return nil, fmt.Errorf("%w %q: overlaps the session networks %s", ErrDefaultSubnet, subnet, SessionRange)
	}
	if n.Contains(local) {
		return nil, fmt.Errorf("%w %q: holds the node's address %s", ErrDefaultSubnet, subnet, local)
	}
	return &defaultNet{subnet: n, base: binary.BigEndian.Uint32(n.IP.To4()), size: 1 << (32 - ones),
		next: 2, ports: map[string]uint32{}, owners: map[string]int{}, links: map[string]string{}, used: map[uint32]bool{}}, nil
}

func (d *defaultNet) addr(n uint32) net.IP { return binary.BigEndian.AppendUint32(nil, d.base+n) }

// gateway is the bridge's address, the containers' default route.
func (d *defaultNet) gateway() *net.IPNet { return &net.IPNet{IP: d.addr(1), Mask: d.subnet.Mask} }

// alloc gives container id an address: round robin, so that an address
// comes back only after the whole subnet was handed out (no stale
// neighbour entry or conntrack of the previous holder meets the next).
func (d *defaultNet) alloc(id string) (uint32, error) {
	for range d.size {
		n := d.next
		if d.next++; d.next >= d.size-1 { // the last is broadcast
			d.next = 2
		}
		if n >= 2 && !d.used[n] {
			d.used[n], d.ports[id] = true, n
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w %s: no address left", ErrDefaultSubnet, d.subnet)
}

func (d *defaultNet) free(id string) {
	if n, ok := d.ports[id]; ok {
		delete(d.used, n)
		delete(d.ports, id)
		delete(d.links, id)
	}
	delete(d.owners, id)
}

// link is the host end of container id's veth.
func (d *defaultNet) link(id string) string {
	if l, ok := d.links[id]; ok {
		return l
	}
	return defaultVeth(d.ports[id])
}

// host tells the host number of ip, false when ip is not in the subnet.
func (d *defaultNet) host(ip net.IP) (uint32, bool) {
	v4 := ip.To4()
	if v4 == nil || !d.subnet.Contains(v4) {
		return 0, false
	}
	return binary.BigEndian.Uint32(v4) - d.base, true
}

func defaultVeth(n uint32) string { return prefixDefault + strconv.FormatUint(uint64(n), 10) }

// setupDefault makes (or finds again, after a crash) the node's default
// bridge with the gateway address, turns on IPv4 forwarding, and
// replaces DefaultTable.
func (m *Manager) setupDefault() error {
	d := m.def
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("default network: enabling IPv4 forwarding: %w", err)
	}
	br, err := netlink.LinkByName(DefaultBridge)
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("default network: %w", err)
	}
	if _, ok := br.(*netlink.Bridge); err == nil && !ok {
		return fmt.Errorf("default network: %s exists and is a %s, not a bridge", DefaultBridge, br.Type())
	}
	if br == nil {
		la := netlink.NewLinkAttrs()
		la.Name = DefaultBridge
		nb := &netlink.Bridge{LinkAttrs: la}
		if err := netlink.LinkAdd(nb); err != nil {
			return fmt.Errorf("default network: bridge %s: %w", DefaultBridge, err)
		}
		br = nb
	}
	// No IPv6 on the bridge: no link-local address of the node's for
	// containers to reach its services at.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+DefaultBridge+"/disable_ipv6", []byte("1"), 0o644)
	gw := d.gateway()
	addrs, err := netlink.AddrList(br, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("default network: %w", err)
	}
	for _, a := range addrs {
		if !a.IP.Equal(gw.IP) || a.Mask.String() != gw.Mask.String() {
			_ = netlink.AddrDel(br, &a) // a previous configuration's
		}
	}
	if err := netlink.AddrReplace(br, &netlink.Addr{IPNet: gw}); err != nil {
		return fmt.Errorf("default network: gateway %s: %w", gw, err)
	}
	// Containers' ports are isolated bridge ports: the gateway answers
	// their ARP for one another (private-VLAN proxy ARP), so that what
	// one sends another goes through the node's forward hook, where the
	// rules let only the same user's through.
	// At once: by default the kernel holds a proxied answer back up to
	// 0.8 s, where a container's ARP asks again after 1 s.
	for f, v := range map[string]string{"ipv4/conf/" + DefaultBridge + "/proxy_arp_pvlan": "1", "ipv4/neigh/" + DefaultBridge + "/proxy_delay": "0"} {
		if err := os.WriteFile("/proc/sys/net/"+f, []byte(v), 0o644); err != nil {
			return fmt.Errorf("default network: proxy ARP on %s: %w", DefaultBridge, err)
		}
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return fmt.Errorf("default network: %w", err)
	}
	return m.rules.syncDefaultTable()
}

// closeDefault removes the default bridge and DefaultTable.
func (m *Manager) closeDefault() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: DefaultTable}
	c.AddTable(t)
	c.DelTable(t)
	err = c.Flush()
	return errors.Join(err, deleteLinks(DefaultBridge))
}

// syncDefaultTable replaces DefaultTable in one atomic batch, from the
// bookkeeping as it is when it starts (one update at a time, so the last
// one written is the newest):
//
//	input:       from trdefault: answers only (ct established,related),
//	             and the host ports (reachRules)
//	forward:     from trdefault to UDP 4789: drop (no VXLAN from a
//	             container, which would leave with the node's address)
//	             to trdefault: answers, the reach_from sources, the
//	             same user's containers (reachRules); nothing else, so
//	             nothing from another user's container on the node
//	             (trdefault to trdefault) or elsewhere
//	postrouting: from the subnet, out of any other link, to no routed
//	             network: masquerade
//
// Writing it registers its chains' hooks again, which waits for an RCU
// grace period (~10 ms): containers coming and going, and peers
// changing, touch the owner sets alone (syncOwners). Neither m.mu nor
// m.tableMu is held.
func (m *ruleWriter) syncDefaultTable() error {
	m.tableMu.Lock()
	defer m.tableMu.Unlock()
	return m.writeDefaultTable()
}

// writeDefaultTable is syncDefaultTable with m.tableMu held.
func (m *ruleWriter) writeDefaultTable() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: DefaultTable}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	accept := nftables.ChainPolicyAccept
	rule := func(ch *nftables.Chain, exprs ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs})
	}
	in := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	rule(in, concat(ifname(expr.MetaKeyIIFNAME, DefaultBridge), ctAnswer(), verdict(expr.VerdictAccept))...)

	fw := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	rule(fw, concat(ifname(expr.MetaKeyIIFNAME, DefaultBridge), udpDport(VXLANPort), counterVerdict(expr.VerdictDrop))...)

	nat := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})
	m.mu.Lock()
	owner, local, err := m.reachRules(c, t, in, fw, nat)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	rule(in, concat(ifname(expr.MetaKeyIIFNAME, DefaultBridge), counterVerdict(expr.VerdictDrop))...)
	rule(nat, concat(sourceIn(m.def.subnet), ifnameNot(expr.MetaKeyOIFNAME, DefaultBridge), []expr.Any{&expr.Counter{}, &expr.Masq{}})...)
	if err := c.Flush(); err != nil {
		m.written.owner, m.written.local = nil, nil
		return fmt.Errorf("nftables table %s: %w", DefaultTable, err)
	}
	m.written.owner, m.written.local = owner, local
	return nil
}

func concat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

func counterVerdict(k expr.VerdictKind) []expr.Any {
	return []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: k}}
}

// ifnameData is name as the kernel compares interface names: padded
// with NULs to IFNAMSIZ.
func ifnameData(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

func ifname(key expr.MetaKey, name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifnameData(name)},
	}
}

func ifnameNot(key expr.MetaKey, name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifnameData(name)},
	}
}

// ctAnswer matches packets of connections conntrack saw the other side
// open (established) or that belong to one (related: ICMP errors).
func ctAnswer() []expr.Any {
	mask := binary.NativeEndian.AppendUint32(nil, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED)
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
	}
}

func udpDport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
	}
}

// sourceIn matches IPv4 packets from n.
func sourceIn(n *net.IPNet) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte(n.Mask), Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(n.IP.To4())},
	}
}
