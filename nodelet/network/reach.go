package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"

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
// default subnet are left out: the node knows its own containers'
// owners. The rules are rewritten when the set changed.
func (m *Manager) SetPeers(peers map[int][]string) error {
	if m.def == nil {
		return nil
	}
	clean := map[int][]string{}
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
	err := m.syncDefaultTable()
	if err != nil {
		m.mu.Lock()
		m.peers = nil // written again on the next call
		m.mu.Unlock()
	}
	return err
}

// owners groups the default addresses the node's containers hold and
// their users' peers by uid, for the rules: only users with a container
// here. m.mu is held.
func (m *Manager) owners() map[int][]net.IP {
	out := map[int][]net.IP{}
	for id, n := range m.def.ports {
		uid, ok := m.def.owners[id]
		if !ok {
			continue
		}
		out[uid] = append(out[uid], m.def.addr(n))
	}
	for uid := range out {
		for _, a := range m.peers[uid] {
			out[uid] = append(out[uid], net.ParseIP(a).To4())
		}
	}
	return out
}

// reachRules adds to c, in table t, the rules of the node's default
// network that Reach and the containers' owners make:
//
//	input:       from trdefault to a host port (tcp, udp): accept
//	forward:     to trdefault: answers; from reach_from (not from
//	             trdefault); from a container of the same user (named
//	             set u<uid> holds its addresses here and elsewhere):
//	             accept; else drop
//	postrouting: to a routed network: no masquerade
//
// m.mu is held.
func (m *Manager) reachRules(c *nftables.Conn, t *nftables.Table, in, fw, nat *nftables.Chain) error {
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
	owners := m.owners()
	uids := slices.Sorted(maps.Keys(owners))
	for _, uid := range uids {
		s := &nftables.Set{Table: t, Name: "u" + strconv.Itoa(uid), KeyType: nftables.TypeIPAddr}
		var elems []nftables.SetElement
		seen := map[string]bool{}
		for _, ip := range owners[uid] {
			if ip != nil && !seen[ip.String()] {
				seen[ip.String()] = true
				elems = append(elems, nftables.SetElement{Key: []byte(ip)})
			}
		}
		if err := c.AddSet(s, elems); err != nil {
			return fmt.Errorf("nftables set %s: %w", s.Name, err)
		}
		rule(fw, concat(ifname(expr.MetaKeyOIFNAME, DefaultBridge), ipv4Only(),
			addrIn(16, s), addrIn(12, s), verdict(expr.VerdictAccept))...)
	}
	rule(fw, concat(ifname(expr.MetaKeyOIFNAME, DefaultBridge), counterVerdict(expr.VerdictDrop))...)
	for _, n := range m.reach.Routed {
		rule(nat, concat(sourceIn(m.def.subnet), destIn(n), verdict(expr.VerdictAccept))...)
	}
	return nil
}

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

// addrIn matches IPv4 packets whose address at offset (12: source, 16:
// destination) is in set s.
func addrIn(offset uint32, s *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID},
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
