// Package devhosts makes "hosts" on one machine for `schedd --dev` and
// multi-node tests (it is part of the dev cluster, not a test helper):
// each host is a network namespace with one interface, eth0, on an
// underlay bridge in the machine's own namespace, with its own address (the nodelet's --advertise). A nodelet run in a host (see
// Command) sees only that interface, builds its sessions' bridges and
// VXLAN tunnels there, and reaches the others' over the underlay as
// separate machines would. schedd is reached through its unix socket,
// which namespaces do not hide.
//
//	root netns:  tu<tag> (bridge, 10.251.N.254/24: the uplink)
//	              ├── tu<tag>h1 ══ eth0 10.250.0.1/24   netns tr-<tag>-h1
//	              │                     10.251.N.1/24, default via .254
//	              └── tu<tag>h2 ══ eth0 10.250.0.2/24   netns tr-<tag>-h2
//	                                    10.251.N.2/24, default via .254
//
// The uplink is the hosts' way to the machine itself, the submit host
// of a dev cluster (a dask scheduler, a licence server): its address,
// Gateway, is the hosts' default route. Each set has a /24 of its own in
// 10.251.0.0/16 (N), so sets made at once never share one.
//
// Every set records its owner, the process that made it, in a file named
// by its tag in RecordDir: the owner's pid and its start time (since
// boot, from /proc), which together name one process even after its pid
// is reused. A set outlives a process killed before it could Close it;
// Sweep removes the sets whose owner is gone, and only those: another
// process's set in use is never touched.
//
// Each set also has a container range, Containers, a /18 of
// 10.128.0.0/10 of its own (from N), and host i of up to MaxRouted hosts
// its /24 in it, Host.Subnet: the host's default network, routed as a
// site's router and nodes would (Route): the machine reaches host i's
// through 10.251.N.i, and every host the others' through their
// underlay addresses.
//
// It drives iproute2 (`ip`) and util-linux (`nsenter`), which the
// nodelet already needs, and needs root.
//
// It imports no troupe package.
package devhosts

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/internal/procfs"
	"golang.org/x/sys/unix"
)

// Subnet is the underlay's network; host i (from 1) has .i.
const Subnet = "10.250.0.0/24"

// RecordDir holds the owner record of every set of hosts on the machine
// (one file per set, named by its tag: "PID START\n", START the
// owner's start time in clock ticks since boot). It is on /run, a tmpfs
// cleared at boot as the namespaces are.
var RecordDir = "/run/troupe/devhosts"

// Errors of the owner records.
var (
	// ErrRecord: a set's owner record cannot be written or read.
	ErrRecord = errors.New("test hosts: owner record")
)

// MaxRouted is the most hosts of a set that get a routed container
// subnet (a /24 each of the set's /18).
const MaxRouted = 63

// Hosts is a set of test hosts on one underlay.
type Hosts struct {
	Bridge string
	// Gateway is the machine's address on the uplink, reachable from
	// every host (their default route).
	Gateway string
	// Uplink is the uplink's network (Gateway's /24).
	Uplink string
	// Containers is the set's container range, which holds every
	// host's Subnet; "" with more than MaxRouted hosts.
	Containers string
	Hosts      []Host
}

// Host is one test host.
type Host struct {
	Name  string // node name: host1, host2…
	NetNS string // `ip netns` name
	IP    string // its underlay address, the nodelet's --advertise
	// Uplink is its address on the uplink, where the machine routes
	// its Subnet.
	Uplink string
	// Subnet is its containers' default network (the nodelet's
	// default_subnet), routed (Route); "" when the set has none.
	Subnet string
}

// Create makes n hosts on a fresh underlay. Close removes them.
func Create(n int) (*Hosts, error) {
	if n < 1 || n > 200 {
		return nil, fmt.Errorf("test hosts: %d hosts, want 1..200", n)
	}
	tag := randTag()
	h := &Hosts{Bridge: "tu" + tag}
	// The record comes first: a set is never on the machine without
	// its owner's name, so Sweep never mistakes it for a dead one's.
	if err := writeOwner(tag); err != nil {
		return nil, err
	}
	if err := ip("link", "add", h.Bridge, "type", "bridge"); err != nil {
		_ = os.Remove(filepath.Join(RecordDir, tag))
		return nil, err
	}
	if err := ip("link", "set", h.Bridge, "up"); err != nil {
		h.Close()
		return nil, err
	}
	uplink, set, err := h.addUplink()
	if err != nil {
		h.Close()
		return nil, err
	}
	h.Uplink = uplink + "0/24"
	// Set N's /18 of 10.128.0.0/10: 10.(128+N/4).(N%4*64).0/18.
	second, third := 128+set/4, set%4*64
	if n <= MaxRouted {
		h.Containers = fmt.Sprintf("10.%d.%d.0/18", second, third)
	}
	for i := 1; i <= n; i++ {
		host := Host{Name: "host" + strconv.Itoa(i), NetNS: "tr-" + tag + "-h" + strconv.Itoa(i), IP: "10.250.0." + strconv.Itoa(i),
			Uplink: uplink + strconv.Itoa(i)}
		if h.Containers != "" {
			host.Subnet = fmt.Sprintf("10.%d.%d.0/24", second, third+i)
		}
		h.Hosts = append(h.Hosts, host)
		veth := h.Bridge + "h" + strconv.Itoa(i)
		steps := [][]string{
			{"netns", "add", host.NetNS},
			{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", host.NetNS},
			{"link", "set", veth, "master", h.Bridge, "up"},
			{"-n", host.NetNS, "addr", "add", host.IP + "/24", "dev", "eth0"},
			{"-n", host.NetNS, "link", "set", "eth0", "up"},
			{"-n", host.NetNS, "link", "set", "lo", "up"},
			{"-n", host.NetNS, "addr", "add", uplink + strconv.Itoa(i) + "/24", "dev", "eth0"},
			{"-n", host.NetNS, "route", "add", "default", "via", h.Gateway},
		}
		for _, s := range steps {
			if err := ip(s...); err != nil {
				h.Close()
				return nil, err
			}
		}
	}
	return h, nil
}

// lock takes the machine-wide lock of the sets' shared resources (the
// uplink subnets, the records); unlock with the file's Close. The lock
// file is beside RecordDir, in root's directory on /run: never in a
// directory other users may write, where one could hold the lock (and
// hang every dev cluster's start) or plant a symbolic link.
func lock() (*os.File, error) {
	dir := filepath.Dir(RecordDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "devhosts.lock"), os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// addUplink gives the underlay bridge the first free 10.251.N.254/24 of
// the machine (under a lock, for sets made at once by other processes)
// and returns the prefix "10.251.N." and N.
func (h *Hosts) addUplink() (string, int, error) {
	f, err := lock()
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	out, err := exec.Command("ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		return "", 0, fmt.Errorf("ip addr show: %w", err)
	}
	for n := range 256 {
		prefix := "10.251." + strconv.Itoa(n) + "."
		if strings.Contains(string(out), " "+prefix) {
			continue
		}
		h.Gateway = prefix + "254"
		return prefix, n, ip("addr", "add", h.Gateway+"/24", "dev", h.Bridge)
	}
	return "", 0, errors.New("test hosts: no free uplink /24 in 10.251.0.0/16")
}

// Route installs the routes of the hosts' container subnets, as a
// site's router and nodes would: the machine reaches host i's Subnet
// through its uplink address, and every host reaches the others'
// through their underlay addresses (no detour through the machine).
// The machine's routes go with the underlay bridge (Close).
func (h *Hosts) Route() error {
	if h.Containers == "" {
		return nil
	}
	for i, host := range h.Hosts {
		if err := ip("route", "replace", host.Subnet, "via", host.Uplink, "dev", h.Bridge); err != nil {
			return err
		}
		for j, other := range h.Hosts {
			if j == i {
				continue
			}
			if err := ip("-n", host.NetNS, "route", "replace", other.Subnet, "via", other.IP); err != nil {
				return err
			}
		}
	}
	return nil
}

// Join adds a host with underlay address 10.250.0.<n> to the underlay
// bridge of an existing set (a third party on the node network: tests
// play a rogue host with it). Leave removes it.
func Join(bridge string, n int) (Host, error) {
	if n < 1 || n > 254 {
		return Host{}, fmt.Errorf("test hosts: address .%d, want 1..254", n)
	}
	host := Host{Name: "extra" + strconv.Itoa(n), NetNS: "tr-" + strings.TrimPrefix(bridge, "tu") + "-x" + strconv.Itoa(n),
		IP: "10.250.0." + strconv.Itoa(n)}
	veth := bridge + "x" + strconv.Itoa(n)
	steps := [][]string{
		{"netns", "add", host.NetNS},
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", host.NetNS},
		{"link", "set", veth, "master", bridge, "up"},
		{"-n", host.NetNS, "addr", "add", host.IP + "/24", "dev", "eth0"},
		{"-n", host.NetNS, "link", "set", "eth0", "up"},
		{"-n", host.NetNS, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			_ = Leave(host)
			return Host{}, err
		}
	}
	return host, nil
}

// Leave removes a host Join added (its namespace, and with it its link).
func Leave(host Host) error {
	if err := ip("netns", "del", host.NetNS); err != nil && !strings.Contains(err.Error(), "No such file") {
		return err
	}
	return nil
}

// Command returns cmd run inside host i (0-based): in its network
// namespace only. (Not `ip netns exec`, whose fresh /sys hides the
// cgroup v1 mounts runc needs.) nsenter execs cmd: its pid is cmd's.
func (h *Hosts) Command(i int, name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + h.Hosts[i].NetNS, "--", name}, args...)...)
}

// Close deletes the hosts' namespaces (and with them their links) and
// the underlay bridge. Run it after the processes in the hosts ended.
func (h *Hosts) Close() error {
	var errs []error
	for _, host := range h.Hosts {
		if err := ip("netns", "del", host.NetNS); err != nil && !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		}
	}
	if err := ip("link", "del", h.Bridge); err != nil && !strings.Contains(err.Error(), "Cannot find") {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		// Kept while something is left: the next Sweep after this
		// process is gone removes it.
		if err := os.Remove(filepath.Join(RecordDir, strings.TrimPrefix(h.Bridge, "tu"))); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("%w: %w", ErrRecord, err))
		}
	}
	return errors.Join(errs...)
}

// Swept is a set Sweep removed: its tag and the owner that was gone.
type Swept struct {
	Tag        string
	Bridge     string
	Namespaces []string
	OwnerPID   int
}

// Sweep removes the sets of hosts whose owner is gone (killed before it
// could Close them): their namespaces, the hosts Join added too, their
// bridge and their record. A set whose owner lives is left as it is, as
// is a set without a record (made before sets had one: unknown is
// never taken for dead); Unowned lists those. Processes still in a
// removed host's namespace keep it until they end.
func Sweep() ([]Swept, error) {
	f, err := lock()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := os.ReadDir(RecordDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRecord, err)
	}
	nss, err := namespaces()
	if err != nil {
		return nil, err
	}
	var out []Swept
	var errs []error
	for _, e := range ents {
		tag := e.Name()
		pid, start, err := readOwner(tag)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if alive(pid, start) {
			continue
		}
		sw := Swept{Tag: tag, Bridge: "tu" + tag, OwnerPID: pid}
		var failed bool
		for _, ns := range nss {
			if !strings.HasPrefix(ns, "tr-"+tag+"-") {
				continue
			}
			if err := ip("netns", "del", ns); err != nil && !strings.Contains(err.Error(), "No such file") {
				errs, failed = append(errs, err), true
				continue
			}
			sw.Namespaces = append(sw.Namespaces, ns)
		}
		if err := ip("link", "del", sw.Bridge); err != nil && !strings.Contains(err.Error(), "Cannot find") {
			errs, failed = append(errs, err), true
		}
		if !failed {
			if err := os.Remove(filepath.Join(RecordDir, tag)); err != nil && !os.IsNotExist(err) {
				errs = append(errs, fmt.Errorf("%w: %w", ErrRecord, err))
			}
		}
		out = append(out, sw)
	}
	return out, errors.Join(errs...)
}

// Unowned lists the test-host namespaces (tr-*) that no record claims:
// sets made before sets recorded their owner. Nobody can tell whether
// their maker lives; `ip netns del NAME` and `ip link del tuTAG` remove
// them by hand.
func Unowned() ([]string, error) {
	nss, err := namespaces()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ns := range nss {
		rest, ok := strings.CutPrefix(ns, "tr-")
		tag, _, cut := strings.Cut(rest, "-")
		if !ok || !cut {
			continue
		}
		if _, err := os.Stat(filepath.Join(RecordDir, tag)); os.IsNotExist(err) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// namespaces are the machine's named network namespaces (`ip netns`).
func namespaces() ([]string, error) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("ip netns list: %w", err)
	}
	var nss []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			nss = append(nss, f[0])
		}
	}
	return nss, nil
}

// writeOwner records this process as the owner of set tag.
func writeOwner(tag string) error {
	self, err := procfs.Self()
	start := self.StartTime
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRecord, err)
	}
	if err := os.MkdirAll(RecordDir, 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrRecord, err)
	}
	p := filepath.Join(RecordDir, tag)
	if err := os.WriteFile(p, fmt.Appendf(nil, "%d %d\n", os.Getpid(), start), 0o644); err != nil {
		return fmt.Errorf("%w %s: %w", ErrRecord, p, err)
	}
	return nil
}

// readOwner reads set tag's record.
func readOwner(tag string) (pid int, start uint64, err error) {
	p := filepath.Join(RecordDir, tag)
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, 0, fmt.Errorf("%w %s: %w", ErrRecord, p, err)
	}
	if _, err := fmt.Sscanf(string(b), "%d %d", &pid, &start); err != nil || pid <= 0 {
		return 0, 0, fmt.Errorf("%w %s: %q is not \"PID START\"", ErrRecord, p, strings.TrimSpace(string(b)))
	}
	return pid, start, nil
}

// alive reports whether process pid, started at start, still runs. A
// process that cannot be read for another reason than its absence is
// taken as alive: its set is left alone.
// A zombie (killed, not yet reaped by its parent) is gone.
func alive(pid int, start uint64) bool {
	s, err := procfs.Read(pid)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	return err != nil || (s.StartTime == start && s.Live())
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func randTag() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
