// Package network gives every session a private network on the nodes it
// spans, and every container its own network namespace on it.
//
//	node A (its own netns on a test host)        node B
//	┌──────────────────────────────────┐         ┌──────────────────────────┐
//	│ main1 netns        sub1 netns     │         │ sub2 netns               │
//	│  eth0 10.64.0.2     eth0 10.64.0.3│         │  eth0 10.64.0.4          │
//	│   │ veth            │ veth        │         │   │ veth                 │
//	│  trv4096-0         trv4096-1      │         │  trv4096-2               │
//	│     └──── trb4096 (bridge) ───┐   │         │   └── trb4096 ──┐        │
//	│                      trx4096 (vxlan, VNI)──UDP 4789──trx4096 ─┘        │
//	└──────────────────────────────────┘         └──────────────────────────┘
//
// One bridge per session per node (trb<VNI>). A session placed on one
// node needs nothing else; a session spread over several nodes gets a
// VXLAN device (trx<VNI>) with the session's VNI on that bridge, its
// local end on the node's advertised address, learning off, one all-zero
// FDB entry per other node of the session, so broadcast (ARP) reaches
// them by head-end replication, and a static entry per container on
// another node (its MAC derives from its address: containerMAC). An
// nftables table (FilterTable, filter.go) drops every datagram of the
// session's VNI that does not come from one of its nodes: the kernel
// itself accepts a VNI's datagrams from any source. Containers get a
// veth pair: trv<VNI>-<rank> on the bridge, eth0 with the address schedd
// allocated (api.Container.Addr, a /24 per session) in a network
// namespace the nodelet creates and pins under its run directory, and
// hands to the runtime (runc joins it through the OCI spec's network
// namespace path).
//
// Isolation: bridges carry no address and the nodes route nothing into
// them, and two sessions never share a bridge or a VNI: there is no path
// between sessions on their session networks and no filter inside one.
// (A node that loads br_netfilter with a FORWARD DROP policy, as Docker
// sets, filters bridged traffic too: allow the trb+ bridges there.)
//
// Over VXLAN the session's links take the MTU of the node's underlay
// link less VXLAN's 50 bytes (overlayMTU): jumbo frames on the node
// network give sessions jumbo frames. Checksum and segmentation offloads
// are on by default on veth, bridge and VXLAN devices, and a TCP stream
// crosses them as 64 KiB segments end to end (BenchmarkVXLAN shows it).
//
// A session with one container on this node and others elsewhere (one
// rank per node, the common MPI layout) needs no bridge either: the
// container's eth0 is the session's VXLAN device itself (a "direct"
// session), made from the node's namespace into the container's, so
// that its UDP socket, and FilterTable, stay in the node's while its
// frames skip a veth and a bridge at each end (less CPU per byte and
// less latency: BenchmarkVXLAN's vxlan against bridged). Its teardown
// deletes it through a handle on the namespace, which a stray process
// may keep alive after its pin is gone, so its VNI is free at once;
// Cleanup deletes those of containers it does not adopt.
//
// A session of one container needs no bridge: its namespace gets no trv
// veth, and its session address sits on its own eth0 (the default
// network's, or without it a veth pair whose both ends stay inside).
//
// The default network (default.go) is every container's way out, as on
// Docker's default bridge: one long-lived bridge per node, trdefault,
// with the gateway (the first address of the default subnet,
// DefaultSubnet unless configured), a veth per container (trd<n> on the
// bridge, isolated from its other ports; eth1 inside, eth0 in a
// one-container session, with the default route) and an nftables table,
// DefaultTable, that masquerades what leaves the node (but for the
// routed networks, reach.go), lets nothing from trdefault reach the node
// but answers and the listed host ports, drops VXLAN out of containers,
// and lets into trdefault only answers, the reach_from sources and the
// same user's containers (the gateway proxies their ARP for one another,
// so container to container crosses that filter). A partition may turn it off
// (Attach's egress). Cleanup finds the bridge again after a crash (or
// makes it); Close removes it at a clean shutdown.
//
// Lifetime: the session's bridge and VXLAN are created with its first
// container on the node and deleted with its last. The Manager's mutex
// guards its bookkeeping only: the first container of a session makes
// its links while the session's others make their own namespaces and
// default veths, waiting for the bridge only to plug into it; the links of
// a container or session that left are set down at once and deleted by
// a background reaper (the kernel takes ~30 ms per veth, ~50 ms per
// bridge), so no teardown holds up another session's setup. A session
// whose VNI comes back while its old links die deletes them first;
// FilterTable keeps a dying session's rules until its VXLAN device is
// gone. Every object is
// named with a prefix that belongs to troupe (trb, trx, trv, trd) or lives
// under the Manager's directory (pinned namespaces; SetLegacyDir names
// where an older nodelet pinned them, swept too), so Cleanup after a
// crash removes exactly what a previous nodelet left: the FDB entries,
// addresses and routes go with their links, the namespaces with their
// pins and their last process.
//
// Many containers starting at once all queue for the kernel's RTNL lock,
// which every link change and lookup takes: so every veth is made with
// one queue each end (the kernel's default, a queue per CPU cut to one
// afterwards, costs an RCU grace period under the lock), a name still
// held by a dying or crashed container's link is deleted when an add
// meets it rather than looked for before every add, a veth is made on
// its bridge in one request (addVeth), and a session's bridge and veths
// are made up (a default veth goes up once isolated).
//
// The pool (pool.go): a container's setup is mostly making its
// namespace and its default veth, so the Manager keeps a few made ahead
// (SetPool; the nodelet's netns_pool, DefaultPool): fresh namespaces,
// pinned under <dir>-pool, loopback up, a veth pair up on the default
// bridge (trp<seq>, isolated; eth0 inside, no address, no route).
// Attach takes one when the container gets the default network, pins it
// at the container's path, and adds the addresses and the route; a
// background filler makes the next. A namespace a container used is
// unpinned with it and never handed out again. Cleanup deletes a dead
// nodelet's pool (the trp links by prefix, the pins by directory), Close
// its own.
//
// Why vishvananda/netlink rather than the CNI plugins: the nodelet would
// have to install and exec plugin binaries and keep CNI's cache to
// delete what it added, and no reference plugin builds a VXLAN with a
// per-session VNI and static FDB entries; the whole job is a dozen
// netlink calls, made in-process, with errors we can wrap and test.
//
// Of troupe it imports internal/api only; it must not import the agent
// (package nodelet) or sched/....
package network
