package network

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// BenchmarkVXLAN measures a multi-node session's overlay against the
// node network it runs on: two test hosts (network namespaces, as the
// e2e tests' nodes are) joined by a veth pair of the underlay MTU, a
// Manager in each attaching one container of a two-container session,
// then iperf3 (TCP, one stream) and a TCP ping-pong, host to host and
// container to container over the session's VXLAN, alternating, b.N
// rounds. Metrics, medians over the rounds: host-MB/s and vxlan-MB/s,
// vxlan-% (of host), host-rtt-us and vxlan-rtt-us (the median round
// trip of a byte), MB per CPU-second of the two iperf3 processes (which
// the kernel's work for their packets is charged to), the figure that
// holds on a loaded machine, and vxlan-rx-B/pkt, the mean packet the
// receiving container's eth0 got: near 64 KiB when segmentation offload
// carries the stream end to end (nothing is cut to the MTU on the way,
// so there is nothing for GRO to merge). Run it with -benchtime 5x or
// more.
func BenchmarkVXLAN(b *testing.B) {
	needNetNS(b)
	if _, err := exec.LookPath("iperf3"); err != nil {
		b.Skip("SKIP: BenchmarkVXLAN needs iperf3 (apt-get install iperf3)")
	}
	for _, mtu := range []int{1500, 9000} {
		b.Run(fmt.Sprintf("underlay-mtu=%d", mtu), func(b *testing.B) { benchVXLAN(b, mtu) })
	}
}

// testHost is a node of the benchmark: its namespace and address.
type testHost struct {
	ns   string // pinned namespace
	addr string
}

func benchVXLAN(b *testing.B, mtu int) {
	hosts, eps := twoHosts(b, mtu)
	if l, err := linkIn(eps[0].NetNS, Iface); err == nil {
		b.Logf("underlay MTU %d: container %s MTU %d", mtu, Iface, l.Attrs().MTU)
	}
	var hostBW, vxBW, hostEff, vxEff, hostRTT, vxRTT, rxSize []float64
	b.ResetTimer()
	for range b.N {
		for _, c := range []struct {
			server, client, addr string
			bw, eff, rtt         *[]float64
		}{
			{hosts[1].ns, hosts[0].ns, hosts[1].addr, &hostBW, &hostEff, &hostRTT},
			{eps[1].NetNS, eps[0].NetNS, eps[1].Addr, &vxBW, &vxEff, &vxRTT},
		} {
			container := c.server == eps[1].NetNS
			var rx0 netlink.LinkStatistics
			if container {
				rx0 = rxStats(b, c.server)
			}
			mbs, perCPU := iperf3(b, c.server, c.client, c.addr)
			if container {
				rx1 := rxStats(b, c.server)
				rxSize = append(rxSize, float64(rx1.RxBytes-rx0.RxBytes)/float64(max(1, rx1.RxPackets-rx0.RxPackets)))
			}
			*c.bw, *c.eff = append(*c.bw, mbs), append(*c.eff, perCPU)
			*c.rtt = append(*c.rtt, pingPong(b, c.server, c.client, c.addr))
		}
	}
	b.StopTimer()
	b.ReportMetric(median(hostBW), "host-MB/s")
	b.ReportMetric(median(vxBW), "vxlan-MB/s")
	b.ReportMetric(100*median(vxBW)/median(hostBW), "vxlan-%")
	b.ReportMetric(median(hostEff), "host-MB/cpu-s")
	b.ReportMetric(median(vxEff), "vxlan-MB/cpu-s")
	b.ReportMetric(median(hostRTT), "host-rtt-us")
	b.ReportMetric(median(vxRTT), "vxlan-rtt-us")
	b.ReportMetric(median(rxSize), "vxlan-rx-B/pkt")
}

// rxStats are the counters of Iface in the namespace at path (the
// session interface of a container).
func rxStats(b *testing.B, path string) netlink.LinkStatistics {
	l, err := linkIn(path, Iface)
	if err != nil || l.Attrs().Statistics == nil {
		b.Fatalf("%s in %s: %v", Iface, path, err)
	}
	return *l.Attrs().Statistics
}

// underlay joins the hosts by a veth pair of the given MTU, eth0 in
// each, with their addresses.
func underlay(b testing.TB, hosts []testHost, mtu int) {
	var nss []netns.NsHandle
	for _, h := range hosts {
		ns, err := netns.GetFromPath(h.ns)
		if err != nil {
			b.Fatal(err)
		}
		defer ns.Close()
		nss = append(nss, ns)
	}
	la := netlink.NewLinkAttrs()
	la.Name, la.MTU, la.Namespace = "vxbench0", mtu, netlink.NsFd(int(nss[0]))
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "vxbench1", PeerMTU: uint32(mtu), PeerNamespace: netlink.NsFd(int(nss[1]))}); err != nil {
		b.Fatal(err)
	}
	for i, h := range hosts {
		hd, err := netlink.NewHandleAt(nss[i])
		if err != nil {
			b.Fatal(err)
		}
		defer hd.Close()
		for _, name := range []string{"lo", fmt.Sprintf("vxbench%d", i)} {
			l, err := hd.LinkByName(name)
			if err != nil {
				b.Fatal(err)
			}
			if name != "lo" {
				if err := hd.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(h.addr), Mask: net.CIDRMask(24, 32)}}); err != nil {
					b.Fatal(err)
				}
			}
			if err := hd.LinkSetUp(l); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func linkIn(path, name string) (netlink.Link, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return h.LinkByName(name)
}

// iperf3 runs an iperf3 server in the namespace at server and a 3 s
// client to addr from client; it returns MB/s received and MB per
// CPU-second of the two processes.
func iperf3(b *testing.B, server, client, addr string) (float64, float64) {
	srv := exec.Command("nsenter", "--net="+server, "--", "iperf3", "-s", "-p", "5299")
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	var r struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			CPU struct {
				Host   float64 `json:"host_total"`
				Remote float64 `json:"remote_total"`
			} `json:"cpu_utilization_percent"`
		} `json:"end"`
	}
	var out []byte
	// The server may not listen yet: iperf3 then tells so (in its JSON,
	// exiting 0 or not); try again.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		out, err = exec.Command("nsenter", "--net="+client, "--", "iperf3", "-c", addr, "-p", "5299", "-t", "3", "-J").Output()
		r.Error = ""
		if jerr := json.Unmarshal(out, &r); jerr != nil {
			b.Fatalf("iperf3 to %s: %v, %v: %s", addr, err, jerr, out)
		}
		if !strings.Contains(r.Error, "unable to connect") || time.Now().After(deadline) {
			break
		}
	}
	if r.Error != "" || r.End.SumReceived.BitsPerSecond == 0 {
		b.Fatalf("iperf3 to %s: %q, nothing received: %s", addr, r.Error, out)
	}
	mbs := r.End.SumReceived.BitsPerSecond / 8e6
	cpu := (r.End.CPU.Host + r.End.CPU.Remote) / 100
	if cpu <= 0 {
		return mbs, 0
	}
	return mbs, mbs / cpu
}

// pingPong returns the median round trip, in µs, of one byte over TCP from
// client to a server at addr in the namespace at server.
func pingPong(b *testing.B, server, client, addr string) float64 {
	const rounds = 2000
	var l net.Listener
	var err error
	inNS(b, server, func() { l, err = net.Listen("tcp4", addr+":5298") })
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	rtts := make([]float64, 0, rounds)
	inNS(b, client, func() {
		var c net.Conn
		if c, err = net.DialTimeout("tcp4", addr+":5298", 10*time.Second); err != nil {
			return
		}
		defer c.Close()
		r, buf := bufio.NewReader(c), []byte{1}
		for range rounds {
			t0 := time.Now()
			if _, err = c.Write(buf); err != nil {
				return
			}
			if _, err = r.ReadByte(); err != nil {
				return
			}
			rtts = append(rtts, float64(time.Since(t0).Nanoseconds())/1000)
		}
	})
	if err != nil {
		b.Fatalf("ping-pong to %s: %v", addr, err)
	}
	return median(rtts) // a round trip the scheduler did not hold up
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
