package network

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// veth is a veth pair addVeth makes in one request: its host end on
// this node's namespace, its peer in another.
type veth struct {
	name   string
	master int  // the bridge the host end joins (its index); 0: none
	mtu    int  // of both ends; 0: the kernel's
	up     bool // the host end
	peer   string
	peerNS int // an open descriptor of the peer's namespace
	mac    net.HardwareAddr
}

// addVeth makes v in one RTM_NEWLINK request: the host end on its
// bridge, the peer in its namespace with its MAC, and one queue each end
// (oneQueue); then, with v.up, sets the host end up in a second, once
// its IPv6 is off (noIPv6). netlink.LinkAdd takes up to four requests,
// each a turn on the kernel's RTNL lock (the add, a lookup for the new
// link's index, another to set its bridge, another to set it up). The
// peer is left down: the kernel (6.18) refuses to set it up in the same
// request (ENOTCONN). A link that still holds the name is replaced, as
// addLink does.
func addVeth(v veth) error {
	err := newVeth(v)
	if errors.Is(err, unix.EEXIST) {
		if derr := deleteLinks(v.name); derr != nil {
			return errors.Join(err, derr)
		}
		err = newVeth(v)
	}
	if err == nil && v.up {
		// Up in a request of its own, once IPv6 is off (noIPv6).
		noIPv6(v.name)
		err = linkUp(v.name)
	}
	if err != nil {
		return fmt.Errorf("veth %s: %w", v.name, err)
	}
	return nil
}

func newVeth(v veth) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK)
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(v.name)))
	if v.mtu > 0 {
		req.AddData(nl.NewRtAttr(unix.IFLA_MTU, nl.Uint32Attr(uint32(v.mtu))))
	}
	if v.master > 0 {
		req.AddData(nl.NewRtAttr(unix.IFLA_MASTER, nl.Uint32Attr(uint32(v.master))))
	}
	req.AddData(nl.NewRtAttr(unix.IFLA_NUM_TX_QUEUES, nl.Uint32Attr(1)))
	req.AddData(nl.NewRtAttr(unix.IFLA_NUM_RX_QUEUES, nl.Uint32Attr(1)))
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("veth"))
	data := info.AddRtAttr(nl.IFLA_INFO_DATA, nil)
	peer := data.AddRtAttr(nl.VETH_INFO_PEER, nil)
	nl.NewIfInfomsgChild(peer, unix.AF_UNSPEC)
	peer.AddRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(v.peer))
	peer.AddRtAttr(unix.IFLA_NUM_TX_QUEUES, nl.Uint32Attr(1))
	peer.AddRtAttr(unix.IFLA_NUM_RX_QUEUES, nl.Uint32Attr(1))
	if v.mtu > 0 {
		peer.AddRtAttr(unix.IFLA_MTU, nl.Uint32Attr(uint32(v.mtu)))
	}
	if v.mac != nil {
		peer.AddRtAttr(unix.IFLA_ADDRESS, []byte(v.mac))
	}
	peer.AddRtAttr(unix.IFLA_NET_NS_FD, nl.Uint32Attr(uint32(v.peerNS)))
	req.AddData(info)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// linkUp sets link name of the nodelet's namespace up, found by name
// in the same request (netlink.LinkSetUp looks its index up first).
func linkUp(name string) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Change, msg.Flags = unix.IFF_UP, unix.IFF_UP
	req.AddData(msg)
	req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(name)))
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("%s up: %w", name, err)
	}
	return nil
}

// loopback is a namespace's lo: always index 1 (the kernel's
// LOOPBACK_IFINDEX), so setting it up needs no lookup.
var loopback = &netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: "lo", Index: 1}}
