package network

import (
	"fmt"
	"net"
	"testing"

	"github.com/vishvananda/netlink"
)

// v6Addrs lists the IPv6 addresses of every link of the calling
// thread's namespace that keep picks, by link name.
func v6Addrs(t *testing.T, keep func(string) bool) map[string][]string {
	t.Helper()
	links, err := linkList()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, l := range links {
		if !keep(l.Attrs().Name) {
			continue
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			t.Fatal(err)
		}
		out[l.Attrs().Name] = []string{}
		for _, a := range addrs {
			out[l.Attrs().Name] = append(out[l.Attrs().Name], a.IP.String())
		}
	}
	return out
}

// TestNoIPv6OnLinks: every link troupe makes, on the host (the default
// veths' host ends, a session's bridge and veths) and in a container's
// namespace (its default and session links), has IPv6 off and no IPv6
// address, with and without the pool; a container's loopback keeps ::1.
// (A link that had an IPv6 address has the kernel walk its connection
// tracking table when the address goes: noIPv6.)
func TestNoIPv6OnLinks(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	for _, pool := range []int{0, 2} {
		t.Run(fmt.Sprintf("pool=%d", pool), func(t *testing.T) {
			m := newPoolManager(t, t.TempDir(), pool)
			vni := uint32(5031 + 10*pool)
			two1, _ := attach(t, m, 1, vni, 2, "main1", true)
			two2, _ := attach(t, m, 1, vni, 2, "sub1", true)
			one, _ := attach(t, m, 2, vni+1, 1, "main1", true)
			sealed, _ := attach(t, m, 3, vni+2, 1, "main1", false)
			for name, ep := range map[string]Endpoint{"main1 of two": two1, "sub1 of two": two2, "one": one, "sealed": sealed} {
				var got map[string][]string
				inNS(t, ep.NetNS, func() {
					got = v6Addrs(t, func(string) bool { return true })
				})
				off := map[string]string{}
				for l := range got {
					if l != "lo" {
						off[l] = readIn(t, ep.NetNS, "/proc/sys/net/ipv6/conf/"+l+"/disable_ipv6")
					}
				}
				for l, addrs := range got {
					switch {
					case l == "lo":
						if len(addrs) != 1 || !net.ParseIP(addrs[0]).Equal(net.IPv6loopback) {
							t.Errorf("%s: lo has %v; want ::1", name, addrs)
						}
					case len(addrs) != 0 || off[l] != "1":
						t.Errorf("%s: %s has IPv6 addresses %v, disable_ipv6 %q; want none, 1", name, l, addrs, off[l])
					}
				}
				if len(got) < 2 {
					t.Errorf("%s: links %v; want lo and the container's", name, got)
				}
			}
			host := v6Addrs(t, isOurs)
			if len(host) < 6 { // the session's bridge and two veths, three default veths
				t.Errorf("host links %v; want troupe's", host)
			}
			for l, addrs := range host {
				if len(addrs) != 0 {
					t.Errorf("host link %s has IPv6 addresses %v; want none", l, addrs)
				}
			}
		})
	}
}
