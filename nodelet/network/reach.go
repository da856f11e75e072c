package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Reach is who may open connections to the containers of the node's
// default network, and where they go without NAT (nodelet.hcl
// routed_networks, reach_from, host_ports).
//
// Whatever it says, a container's default address takes connections
// from the containers of its own user (on this node, and on other nodes
// once schedd names them: SetPeers) and from no other user's.
type Reach struct {
	// Routed are the destinations containers reach with their own
	// address, not masqueraded: the cluster's container range (every
	// node's default subnet) and the submit hosts' networks. Empty: NAT
	// to everything (the node's default subnet is node-local).
	Routed []*net.IPNet
	// From are the sources that may open connections to any container
	// of the node: the submit (login) hosts.
	From []*net.IPNet
	// HostPorts are the TCP and UDP ports of the node itself that its
	// containers may connect to (a one-machine site's scheduler or
	// licence server); none by default.
	HostPorts []uint16
}

// ErrReach: a reach setting that cannot be used.
var ErrReach = errors.New("default network reach")

// ParseNets parses a list of IPv4 CIDRs, naming the setting (what) in
// errors.
func ParseNets(what string, cidrs []string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, s := range cidrs {
		ip, n, err := net.ParseCIDR(s)
		if err != nil || ip.To4() == nil {
			return nil, fmt.Errorf("%w: %s: %q is not an IPv4 CIDR", ErrReach, what, s)
		}
		if !ip.Equal(n.IP) {
			return nil, fmt.Errorf("%w: %s: %q has host bits set (want %s)", ErrReach, what, s, n)
		}
		out = append(out, n)
	}
	return out, nil
}

// SetReach sets r. Call it before Cleanup, which writes the node's
// rules. With Routed, the node's default subnet must lie in one of them:
// other nodes' containers and the submit hosts reach this node's with
// their own addresses.
func (m *Manager) SetReach(r Reach) error {
	if m.def == nil {
		if len(r.Routed)+len(r.From)+len(r.HostPorts) > 0 {
			return fmt.Errorf("%w: the node has no default network", ErrReach)
		}
		return nil
	}
	for _, n := range r.Routed {
		if n.Contains(SessionRange.IP) || SessionRange.Contains(n.IP) {
			return fmt.Errorf("%w: routed network %s overlaps the session networks %s", ErrReach, n, SessionRange)
		}
	}
	if len(r.Routed) > 0 && !slices.ContainsFunc(r.Routed, func(n *net.IPNet) bool { return within(m.def.subnet, n) }) {
		return fmt.Errorf("%w: default subnet %s lies in no routed network: other nodes' containers would come masqueraded", ErrReach, m.def.subnet)
	}
	for _, p := range r.HostPorts {
		if p == 0 {
			return fmt.Errorf("%w: host port 0", ErrReach)
		}
	}
	m.mu.Lock()
	m.reach = r
	m.mu.Unlock()
	return nil
}

// Routed tells whether the node's default network is routed: its
// containers' default addresses are reachable beyond the node (their
// owners' other containers elsewhere need them: SetPeers).
func (m *Manager) Routed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.def != nil && len(m.reach.Routed) > 0
}

// within tells whether a lies inside b.
func within(a, b *net.IPNet) bool {
	ao, _ := a.Mask.Size()
	bo, _ := b.Mask.Size()
	return ao >= bo && b.Contains(a.IP)
}

// SetPeers sets, by uid, the default addresses of the users' containers
// on other nodes (schedd's Assignment.Peers): a container takes
// connections from those of its own user. Addresses in the node's own
// default subnet are left out (the node knows its own containers'
// owners), and so is an address two users claim (a stale one: it
// belongs to neither here until schedd agrees). The node's rules change
// when the set did.
func (m *Manager) SetPeers(peers map[int][]string) error {
	if m.def == nil {
		return nil
	}
	clean := map[int][]string{}
	claims := map[string]int{}
	for uid, addrs := range peers {
		for _, a := range addrs {
			ip := net.ParseIP(a).To4()
			if ip == nil || m.def.subnet.Contains(ip) {
				continue
			}
			clean[uid] = append(clean[uid], ip.String())
		}
		slices.Sort(clean[uid])
		clean[uid] = slices.Compact(clean[uid])
		for _, a := range clean[uid] {
			claims[a]++
		}
	}
	for uid, addrs := range clean {
		clean[uid] = slices.DeleteFunc(addrs, func(a string) bool { return claims[a] > 1 })
		if len(clean[uid]) == 0 {
			delete(clean, uid)
		}
	}
	m.mu.Lock()
	same := maps.EqualFunc(clean, m.peers, slices.Equal[[]string])
	if !same {
		m.peers = clean
	}
	m.mu.Unlock()
	if same {
		return nil
	}
	return m.rules.syncOwners()
}

// The sets of DefaultTable that say who owns what: setOwner maps a
// default address (of a container of this node, or a peer's) to its
// user's uid; setLocal holds this node's containers as address . uid.
// A connection into trdefault is a user's own when (destination,
// owner of the source) is in setLocal.
const (
	setOwner = "owner"
	setLocal = "local"
)

// owners is the content of the owner sets: default address → uid, for
// the node's containers (local) and for all (owner: theirs and the
// peers'). m.mu is held.
func (m *ruleWriter) owners() (owner, local map[string]int) {
	owner, local = map[string]int{}, map[string]int{}
	for uid, addrs := range m.peers {
		for _, a := range addrs {
			owner[a] = uid
		}
	}
	for id, n := range m.def.ports {
		if uid, ok := m.def.owners[id]; ok {
			a := m.def.addr(n).String()
			owner[a], local[a] = uid, uid
		}
	}
	return owner, local
}

func ownerSets(t *nftables.Table) (owner, local *nftables.Set) {
	return &nftables.Set{Table: t, Name: setOwner, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeMark},
		&nftables.Set{Table: t, Name: setLocal, KeyType: nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeMark), Concatenation: true}
}

func uidBytes(uid int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(uid)) }

func ownerElems(owner map[string]int) []nftables.SetElement {
	var out []nftables.SetElement
	for a, uid := range owner {
		out = append(out, nftables.SetElement{Key: net.ParseIP(a).To4(), Val: uidBytes(uid)})
	}
	return out
}

func localElems(local map[string]int) []nftables.SetElement {
	var out []nftables.SetElement
	for a, uid := range local {
		out = append(out, nftables.SetElement{Key: append(net.ParseIP(a).To4(), uidBytes(uid)...)})
	}
	return out
}

// syncOwners brings the owner sets of DefaultTable to the bookkeeping,
// element by element: no chain is touched, so no hook is registered
// again (which waits for an RCU grace period, ~10 ms). Should the kernel
// refuse, the whole table is written again. Neither m.mu nor m.tableMu
// is held.
func (m *ruleWriter) syncOwners() error {
	m.tableMu.Lock()
	defer m.tableMu.Unlock()
	m.mu.Lock()
	owner, local := m.owners()
	m.mu.Unlock()
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: DefaultTable}
	oset, lset := ownerSets(t)
	// What goes, or changes owner, first: an element is added once.
	var delOwner, addOwner, delLocal, addLocal = map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	// A left container's address stays (unplug): it is the node's to
	// give, and goes with the next container that takes it.
	kept := func(a string) bool { return m.def.subnet.Contains(net.ParseIP(a)) }
	for a, uid := range m.written.owner {
		if v, ok := owner[a]; ok && v != uid || !ok && !kept(a) {
			delOwner[a] = uid
		} else if !ok {
			owner[a] = uid
		}
	}
	for a, uid := range owner {
		if v, ok := m.written.owner[a]; !ok || v != uid {
			addOwner[a] = uid
		}
	}
	for a, uid := range m.written.local {
		if v, ok := local[a]; ok && v != uid {
			delLocal[a] = uid
		} else if !ok {
			local[a] = uid
		}
	}
	for a, uid := range local {
		if v, ok := m.written.local[a]; !ok || v != uid {
			addLocal[a] = uid
		}
	}
	if len(delOwner)+len(addOwner)+len(delLocal)+len(addLocal) == 0 {
		return nil
	}
	for _, step := range []struct {
		set  *nftables.Set
		el   []nftables.SetElement
		add  bool
		what string
	}{
		{lset, localElems(delLocal), false, setLocal}, {oset, ownerElems(delOwner), false, setOwner},
		{oset, ownerElems(addOwner), true, setOwner}, {lset, localElems(addLocal), true, setLocal},
	} {
		if len(step.el) == 0 {
			continue
		}
		if step.add {
			err = c.SetAddElements(step.set, step.el)
		} else {
			err = c.SetDeleteElements(step.set, step.el)
		}
		if err != nil {
			return fmt.Errorf("nftables set %s: %w", step.what, err)
		}
	}
	if err := c.Flush(); err == nil {
		m.written.owner, m.written.local = owner, local
		return nil
	}
	return m.writeDefaultTable()
}

// reachRules adds to c, in table t, the rules of the node's default
// network that Reach and the containers' owners make, and the owner sets
// with what the bookkeeping holds (recorded as written once c is
// flushed: the caller):
//
//	input:       from trdefault to a host port (tcp, udp): accept
//	forward:     to trdefault: answers; from reach_from (not from
//	             trdefault); from a container of the same user as the
//	             destination's (owner, local): accept; else drop
//	postrouting: to a routed network: no masquerade
//
// m.mu is held.
func (m *ruleWriter) reachRules(c *nftables.Conn, t *nftables.Table, in, fw, nat *nftables.Chain) (owner, local map[string]int, err error) {
	rule := func(ch *nftables.Chain, exprs ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs})
	}
	for _, p := range m.reach.HostPorts {
		for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
			rule(in, concat(ifname(expr.MetaKeyIIFNAME, DefaultBridge), l4Dport(proto, p), verdict(expr.VerdictAccept))...)
		}
	}
	rule(fw, concat(ifname(expr.MetaKeyOIFNAME, DefaultBridge), ctAnswer(), verdict(expr.VerdictAccept))...)
	for _, n := range m.reach.From {
		rule(fw, concat(ifname(expr.MetaKeyOIFNAME, DefaultBridge), ifnameNot(expr.MetaKeyIIFNAME, DefaultBridge),
			sourceIn(n), verdict(expr.VerdictAccept))...)
	}
	owner, local = m.owners()
	oset, lset := ownerSets(t)
	if err := c.AddSet(oset, ownerElems(owner)); err != nil {
		return nil, nil, fmt.Errorf("nftables set %s: %w", setOwner, err)
	}
	if err := c.AddSet(lset, localElems(local)); err != nil {
		return nil, nil, fmt.Errorf("nftables set %s: %w", setLocal, err)
	}
	// The destination into the first 32-bit register, the source's
	// owner (if it has one) into the next: together, the key of local.
	rule(fw, concat(ifname(expr.MetaKeyOIFNAME, DefaultBridge), ipv4Only(), []expr.Any{
		&expr.Payload{DestRegister: reg32(0), Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Payload{DestRegister: reg32(2), Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Lookup{SourceRegister: reg32(2), SetName: oset.Name, SetID: oset.ID, DestRegister: reg32(1), IsDestRegSet: true},
		&expr.Lookup{SourceRegister: reg32(0), SetName: lset.Name, SetID: lset.ID},
	}, verdict(expr.VerdictAccept))...)
	rule(fw, concat(ifname(expr.MetaKeyOIFNAME, DefaultBridge), counterVerdict(expr.VerdictDrop))...)
	for _, n := range m.reach.Routed {
		rule(nat, concat(sourceIn(m.def.subnet), destIn(n), verdict(expr.VerdictAccept))...)
	}
	return owner, local, nil
}

// reg32 is nftables' 32-bit register n (NFT_REG32_00 + n).
func reg32(n uint32) uint32 { return 8 + n }

// l4Dport matches packets of protocol proto to port.
func l4Dport(proto byte, port uint16) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
	}
}

func ipv4Only() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
	}
}

// destIn matches IPv4 packets to n.
func destIn(n *net.IPNet) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte(n.Mask), Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(n.IP.To4())},
	}
}
