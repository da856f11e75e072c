package network

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// FilterTable is the nftables table (family inet) the nodelet keeps in
// the node's network namespace: one base chain on the input hook that
// drops every VXLAN datagram carrying a session's VNI unless it comes
// from one of the session's other nodes.
//
// The kernel's VXLAN driver delivers a datagram to the device of its VNI
// whatever its source address (learning only decides whether the source
// is remembered), so without this filter any host that can send UDP to
// the node's port 4789 could put frames on a session's bridge. The input
// hook runs after the IP layer reassembled fragments, and the rules read
// the UDP and VXLAN headers at the transport header, wherever IP options
// put it, so neither fragments nor options get a datagram past them.
const FilterTable = "troupe-vxlan"

// syncFilter replaces FilterTable, in one atomic netlink batch, with the
// rules of the sessions that have a VXLAN device: those in m.sessions,
// and those in m.dying, whose device is not deleted yet (first: a VNI
// that came round again has its new session's rules once the old is
// gone); with none, the table is removed. One update at a time, each
// from the bookkeeping as it is when it starts, so the last one written
// is the newest. Neither m.mu nor m.filterMu is held.
func (m *ruleWriter) syncFilter() error {
	m.filterMu.Lock()
	defer m.filterMu.Unlock()
	type overlay struct {
		vni   uint32
		peers []net.IP
	}
	var overlays []overlay
	m.mu.Lock()
	for vni, td := range m.dying {
		if td.vxlan != "" {
			overlays = append(overlays, overlay{vni, td.peers})
		}
	}
	for vni, s := range m.sessions {
		if s.vxlan != "" {
			overlays = append(overlays, overlay{vni, s.peers})
		}
	}
	m.mu.Unlock()
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: FilterTable}
	c.AddTable(t) // so that the delete finds one
	c.DelTable(t)
	if len(overlays) > 0 {
		c.AddTable(t)
		accept := nftables.ChainPolicyAccept
		ch := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
		for _, o := range overlays {
			for _, peer := range o.peers {
				exprs := append(vxlanMatch(o.vni), sourceIs(peer)...)
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(exprs, &expr.Verdict{Kind: expr.VerdictAccept})})
			}
			exprs := append(vxlanMatch(o.vni), &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop})
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables table %s: %w", FilterTable, err)
	}
	return nil
}

// vxlanMatch matches a UDP datagram to VXLANPort whose VXLAN header
// (after the 8-byte UDP header; the VNI in its bytes 4 to 6) carries vni.
func vxlanMatch(vni uint32) []expr.Any {
	port := binary.BigEndian.AppendUint16(nil, VXLANPort)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 12, Len: 3},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(vni >> 16), byte(vni >> 8), byte(vni)}},
	}
}

// sourceIs matches packets whose IP source is ip.
func sourceIs(ip net.IP) []expr.Any {
	if v4 := ip.To4(); v4 != nil {
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: v4},
		}
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV6}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 16},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip.To16()},
	}
}

// containerMAC is the MAC of the container with session address ip:
// locally administered, derived from the address, so that every node of
// the session knows every container's MAC without learning it.
func containerMAC(ip net.IP) net.HardwareAddr {
	v4 := ip.To4()
	if v4 == nil {
		return nil
	}
	return net.HardwareAddr{0x02, 0x54, v4[0], v4[1], v4[2], v4[3]}
}
