package nodelet

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/nodelet/network"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/runtime/apptainer"
	"github.com/troupe-hpc/troupe/nodelet/runtime/process"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runc"
)

// Runtime choices for Config.Runtime.
const (
	RuntimeAuto      = "auto" // runc when root and runc is installed, else process
	RuntimeRunc      = runc.Name
	RuntimeProcess   = process.Name
	RuntimeApptainer = apptainer.Name
)

// OCI runtime choices for Config.OCIRuntime: what the runc driver
// starts containers with.
const (
	// OCIAuto: the first of crun, libcontainer and runc that runs a
	// trial container (runc itself is not tried).
	OCIAuto = "auto"
	OCICrun = runc.BinCrun // crun, or the nodelet does not start
	// OCILibcontainer: runc's libcontainer in-process, the nodelet
	// re-executed as each container's init (no OCI runtime binary).
	OCILibcontainer = runc.Libcontainer
	OCIRunc         = runc.BinRunc
	// OCIFake: no OCI runtime at all, a benchmark aid (runc.NewFakeIn):
	// the runc driver prepares each container as for runc, writes the
	// wall clock as its first output line and starts nothing. Refused
	// unless Config.BenchmarkFakeRuntime is set too (ErrFakeRuntime),
	// never chosen by auto.
	OCIFake = runc.Fake
)

// ErrFakeRuntime: the fake OCI runtime was asked for without
// Config.BenchmarkFakeRuntime.
var ErrFakeRuntime = errors.New("the fake OCI runtime starts no container (a benchmark aid, make bench-sessions RUNTIME=fake): " +
	"it needs benchmark_fake_runtime = true in the nodelet's config file as well")

// Network choices for Config.Network.
const (
	NetworkAuto    = "auto"    // session with an isolating runtime (runc), else host
	NetworkSession = "session" // private session networks (bridge / VXLAN), package network
	NetworkHost    = "host"    // containers share the node's network
	// DefaultSubnetNone, as Config.DefaultSubnet, gives containers no
	// default network: their session network only.
	DefaultSubnetNone = "none"
)

// Defaults for zero Config fields.
const (
	DefaultStateDir = "/var/lib/troupe/nodelet"
	// DefaultRunDir is the run directory of a nodelet whose StateDir is
	// the default: on /run, a tmpfs on systemd hosts (not under
	// /run/troupe, schedd's, which systemd removes when schedd stops).
	DefaultRunDir = "/run/troupe-nodelet"
	// DefaultHeartbeat is the heartbeat interval when schedd announces
	// none (schedd announces its node timeout / 8).
	DefaultHeartbeat = 10 * time.Second
	DefaultStopGrace = 10 * time.Second
	InitName         = "troupe-init"
	FenceName        = "troupe-fence"
	SSHName          = "troupe-ssh"
	SlurmName        = "troupe-slurm"
)

// Config configures the agent. Zero fields get the defaults noted.
type Config struct {
	Name     string // node name; default: the hostname
	Addr     string // schedd address (see client.New); required
	StateDir string // default DefaultStateDir
	// RunDir holds what containers need only while they exist: their
	// bundles, the images' overlay mountpoints, session files, the OCI
	// runtime's state and the records a restarted nodelet re-attaches
	// with. Many small files are made and removed there with every
	// container, so it belongs on a tmpfs (a reboot, which ends every
	// container, empties it). The job's own files (its home) stay in
	// StateDir. Default: DefaultRunDir when StateDir is the default,
	// else StateDir/run.
	RunDir  string
	Runtime string // RuntimeAuto (default), RuntimeRunc, RuntimeProcess
	// OCIRuntime is what the runc driver starts containers with:
	// OCIAuto (default), OCICrun, OCILibcontainer or OCIRunc. Binaries
	// are found on $PATH, else in /usr/sbin, /usr/bin, /usr/local/sbin,
	// /usr/local/bin.
	OCIRuntime string
	// BenchmarkFakeRuntime allows OCIRuntime OCIFake, whose containers
	// do not run: only a benchmark of troupe's own share of a start
	// sets it (nodelet.hcl's benchmark_fake_runtime = true).
	BenchmarkFakeRuntime bool
	CPU                  float64 // cores offered; 0: runtime.NumCPU()
	Memory               int64   // bytes offered; 0: MemTotal of /proc/meminfo
	Advertise            string  // IP containers are reached at; see advertise()
	// InitBinary is the host path of troupe-init; default: next to the
	// running executable.
	InitBinary string
	// SSHBinary is the host path of troupe-ssh, the SSH server and client
	// mounted into isolated containers; default: next to the running
	// executable. Only isolating runtimes (runc) need it.
	SSHBinary string
	// SlurmBinary is the host path of troupe-slurm, mounted as srun
	// beside troupe-ssh so that a job's srun works whatever its image;
	// default: next to the running executable, if it is there (without
	// it, containers get no srun of troupe's).
	SlurmBinary string
	// Network is NetworkAuto (default), NetworkSession or NetworkHost.
	Network string
	// DefaultSubnet is the subnet of the node's default network, the
	// route out every container on a session network gets (NAT through
	// the node; package network): network.DefaultSubnet when empty,
	// DefaultSubnetNone for no default network at all.
	DefaultSubnet string
	// RoutedNetworks, ReachFrom and HostPorts say who reaches the
	// default network's containers and what they reach without NAT
	// (network.Reach): IPv4 CIDRs, and ports of the node. Empty: NAT to
	// everything, nothing in from outside, no port of the node.
	RoutedNetworks, ReachFrom []string
	HostPorts                 []int
	// NetNSPool is how many network namespaces the node keeps prepared
	// for containers on a session network (package network, pool.go):
	// 0 for network.DefaultPool, negative for none.
	NetNSPool int
	// SessionSecret is the file session SSH keys are derived from (see
	// package sshkey); every nodelet of a cluster needs the same one for
	// multi-node sessions. Default: StateDir/session-secret, made when
	// missing (right for a one-node cluster only).
	SessionSecret string
	// Images is the image catalog (etc/images.hcl) job image names are
	// resolved with; empty: names are refused, paths and "host" work.
	Images string
	// AllowedMountRoots are the host directories job mount sources must
	// lie under; nil: DevMountRoots (/tmp and the invoking user's home).
	AllowedMountRoots []string
	// FakeGPUs, when > 0, replaces GPU discovery with that many fake
	// devices (tests and dev clusters).
	FakeGPUs int
	// PidsLimit caps the tasks of one container; 0: the runtime's
	// default (4096).
	PidsLimit int64
	// Heartbeat caps the heartbeat interval; 0: as schedd announces
	// (its node timeout / 8; DefaultHeartbeat when it announces none).
	Heartbeat time.Duration
	// FenceBinary is the host path of troupe-fence (package fence);
	// default: next to the running executable.
	FenceBinary string
	// FenceChildren: at the lease's deadline the fence also kills every
	// other descendant of this process (the process and apptainer
	// runtimes' containers). Only for a process that is the agent alone
	// (cmd/nodelet), never for an agent run inside another program.
	FenceChildren bool
	StopGrace     time.Duration // SIGTERM → SIGKILL; default DefaultStopGrace
	// MetricsAddr is where /metrics (Prometheus) is served, e.g.
	// 127.0.0.1:9101; "": no metrics server.
	MetricsAddr string
	// JoinTokenFile holds the cluster's join token (schedd
	// --join-token-file): registration presents it and gets the node's
	// own credential, which every later request carries. "": register
	// with the client's own identity (the unix socket's root).
	JoinTokenFile string
	// CA is a PEM file of the CA that signed schedd's TLS certificate
	// ("": the system's CAs and $TROUPE_CA).
	CA string
	// MaxStreamsPerJob and MaxStreamsPerUser cap the terminal and app
	// streams the node serves at once for one job, and for the jobs of
	// one user; 0 is connlimit.DefaultPerJob and DefaultPerUser, a
	// negative value unlimited. MaxStreams caps them all together; 0
	// derives it from the limit of open files (a quarter of what it
	// leaves beyond connlimit.DefaultReserve). A stream past a cap is
	// refused with a message naming it, before it costs a descriptor
	// for the terminal or the port.
	MaxStreamsPerJob, MaxStreamsPerUser, MaxStreams int
	// Health is the node's health check (nodelet.hcl health_check): the
	// site's program, if any, and the nodelet's own checks, run every
	// Health.Interval.
	Health HealthCheck
}

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	var err error
	if c.Addr == "" {
		return c, errors.New("no schedd address")
	}
	if c.Name == "" {
		if c.Name, err = os.Hostname(); err != nil {
			return c, fmt.Errorf("node name: %w", err)
		}
	}
	if c.RunDir == "" {
		c.RunDir = filepath.Join(c.StateDir, "run")
		if c.StateDir == "" || filepath.Clean(c.StateDir) == DefaultStateDir {
			c.RunDir = DefaultRunDir
		}
	}
	c.StateDir = cmp.Or(c.StateDir, DefaultStateDir)
	c.Runtime = cmp.Or(c.Runtime, RuntimeAuto)
	c.OCIRuntime = cmp.Or(c.OCIRuntime, OCIAuto)
	switch c.OCIRuntime {
	case OCIAuto, OCICrun, OCILibcontainer, OCIRunc:
	case OCIFake:
		if !c.BenchmarkFakeRuntime {
			return c, fmt.Errorf("oci runtime %q: %w", c.OCIRuntime, ErrFakeRuntime)
		}
		if c.Runtime != RuntimeRunc {
			return c, fmt.Errorf("oci runtime %q: needs runtime runc (the driver it stands in for), not %s", c.OCIRuntime, c.Runtime)
		}
	default:
		return c, fmt.Errorf("oci runtime %q: want auto, crun, libcontainer or runc", c.OCIRuntime)
	}
	c.Network = cmp.Or(c.Network, NetworkAuto)
	switch c.Network {
	case NetworkAuto, NetworkSession, NetworkHost:
	default:
		return c, fmt.Errorf("network %q: want auto, session or host", c.Network)
	}
	c.DefaultSubnet = cmp.Or(c.DefaultSubnet, network.DefaultSubnet)
	switch {
	case c.NetNSPool == 0:
		c.NetNSPool = network.DefaultPool
	case c.NetNSPool > network.MaxPool:
		return c, fmt.Errorf("netns pool %d: at most %d", c.NetNSPool, network.MaxPool)
	}
	if c.AllowedMountRoots == nil {
		c.AllowedMountRoots = DevMountRoots()
	}
	if c.Heartbeat < 0 {
		return c, fmt.Errorf("heartbeat %s: must not be negative", c.Heartbeat)
	}
	c.StopGrace = cmp.Or(c.StopGrace, DefaultStopGrace)
	if c.Health, err = c.Health.withDefaults(); err != nil {
		return c, err
	}
	if c.CPU == 0 {
		c.CPU = float64(goruntime.NumCPU())
	}
	if c.Memory == 0 {
		if c.Memory, err = memTotal(); err != nil {
			return c, err
		}
	}
	if c.CPU < 0 || c.Memory < 0 {
		return c, errors.New("negative cpu or memory")
	}
	if c.Advertise == "" {
		c.Advertise = advertise(c.Addr)
	} else if net.ParseIP(c.Advertise) == nil {
		return c, fmt.Errorf("advertise %q: not an IP address", c.Advertise)
	}
	if c.InitBinary, err = findTool(InitName, c.InitBinary); err != nil {
		return c, err
	}
	if c.FenceBinary, err = findTool(FenceName, c.FenceBinary); err != nil {
		return c, err
	}
	if c.SSHBinary != "" || c.Runtime != RuntimeProcess {
		if c.SSHBinary, err = findTool(SSHName, c.SSHBinary); err != nil && c.Runtime == RuntimeRunc {
			return c, err
		}
	}
	if c.SlurmBinary != "" {
		if c.SlurmBinary, err = findTool(SlurmName, c.SlurmBinary); err != nil {
			return c, err
		}
	} else if p, err := findTool(SlurmName, ""); err == nil {
		c.SlurmBinary = p
	}
	return c, nil
}

// newRuntime picks the container runtime Config.Runtime names and, for
// the runc driver, what it starts containers with (Config.OCIRuntime,
// ociRuntime).
func newRuntime(c Config, log *slog.Logger) (runtime.Runtime, error) {
	switch c.Runtime {
	case RuntimeProcess:
		return process.New(), nil
	case RuntimeApptainer:
		return apptainer.New("")
	case RuntimeRunc:
		if os.Geteuid() != 0 {
			return nil, errors.New("runtime runc needs root (rootless runc is not supported)")
		}
		return ociRuntime(c, log)
	case RuntimeAuto:
		if os.Geteuid() == 0 {
			r, err := ociRuntime(c, log)
			if err == nil {
				return r, nil
			}
			if c.OCIRuntime == OCICrun || c.OCIRuntime == OCILibcontainer {
				return nil, err
			}
		}
		return process.New(), nil
	}
	return nil, fmt.Errorf("unknown runtime %q: want auto, runc, apptainer or process", c.Runtime)
}

// ociRuntime starts the runc driver with what Config.OCIRuntime names.
// OCIAuto tries, once, at start: crun when it is installed, then
// libcontainer in-process, each with a trial container (runc.Probe,
// runc.ProbeLibcontainer), and takes the first that runs it; each that
// fails gets one warning naming why; runc is the last resort, untried.
// An explicit OCICrun or OCILibcontainer that fails its trial is an
// error naming the cause.
//
// Containers a previous run left (a detached restart) are known only to
// what started them: while any remain, that is kept (auto) or required
// (an explicit other choice is an error), so that none vanishes from
// Recover or Cleanup.
func ociRuntime(c Config, log *slog.Logger) (*runc.Runtime, error) {
	dir := c.ociRunDir()
	if c.OCIRuntime == OCIFake {
		if !c.BenchmarkFakeRuntime {
			return nil, fmt.Errorf("--oci-runtime fake: %w", ErrFakeRuntime)
		}
		if prev, root := previousOCI(c.StateDir, dir); prev != "" {
			return nil, fmt.Errorf("--oci-runtime fake: containers a previous run started with %s remain under %s; use --oci-runtime %s until they are gone", prev, root, prev)
		}
		log.Warn("OCI runtime: fake, a benchmark aid: containers are prepared but never run (benchmark_fake_runtime)")
		return runc.NewFakeIn(c.StateDir, dir)
	}
	if prev, root := previousOCI(c.StateDir, dir); prev != "" {
		if c.OCIRuntime != OCIAuto && c.OCIRuntime != prev {
			return nil, fmt.Errorf("--oci-runtime %s: containers a previous run started with %s remain under %s; use --oci-runtime %s until they are gone", c.OCIRuntime, prev, root, prev)
		}
		switch prev {
		case OCIRunc:
			return newRunc(c, "", dir)
		case OCILibcontainer:
			r, err := runc.NewLibcontainerIn(c.StateDir, dir)
			if err != nil {
				return nil, fmt.Errorf("containers a previous run started with %s remain under %s: %w", prev, root, err)
			}
			log.Info("OCI runtime: keeping the previous run's, whose containers remain", "oci", r.OCI(), "root", root)
			return r, nil
		}
		bin, err := findBinary(prev)
		if err != nil {
			return nil, fmt.Errorf("containers a previous run started with %s remain under %s: %w", prev, root, err)
		}
		log.Info("OCI runtime: keeping the previous run's, whose containers remain", "binary", bin, "root", root)
		return newRunc(c, bin, dir)
	}
	if c.OCIRuntime == OCIRunc {
		return newRunc(c, "", dir)
	}
	if c.OCIRuntime != OCILibcontainer {
		crun, err := findBinary(runc.BinCrun)
		if err != nil && c.OCIRuntime == OCICrun {
			return nil, fmt.Errorf("--oci-runtime crun: %w", err)
		}
		if err == nil {
			start := time.Now()
			perr := runc.Probe(context.Background(), crun, c.InitBinary, filepath.Join(c.StateDir, "probe"))
			if perr == nil {
				log.Info("OCI runtime: crun runs containers here", "binary", crun, "trial", time.Since(start).Round(time.Millisecond))
				return newRunc(c, crun, dir)
			}
			if c.OCIRuntime == OCICrun {
				return nil, fmt.Errorf("--oci-runtime crun: %s does not work here: %w", crun, perr)
			}
			log.Warn(fmt.Sprintf("crun present but not working here: %v; trying libcontainer", perr), "binary", crun)
		}
	}
	start := time.Now()
	perr := runc.ProbeLibcontainer(context.Background(), c.InitBinary, filepath.Join(c.StateDir, "probe"))
	if perr == nil {
		r, err := runc.NewLibcontainerIn(c.StateDir, dir)
		if err == nil {
			log.Info("OCI runtime: libcontainer runs containers here, in-process", "oci", r.OCI(), "trial", time.Since(start).Round(time.Millisecond))
			return r, nil
		}
		perr = err
	}
	if c.OCIRuntime == OCILibcontainer {
		return nil, fmt.Errorf("--oci-runtime libcontainer: does not work here: %w", perr)
	}
	log.Warn(fmt.Sprintf("libcontainer does not work here: %v; using runc", perr))
	return newRunc(c, "", dir)
}

// ociFile records, in the state directory, the OCI runtime (OCICrun or
// OCIRunc) whose containers are under runc's state root.
const ociFile = "oci-runtime"

// previousOCI returns the OCI runtime a previous run started the
// containers it left with, and the state root they are under; "" when
// none is left. The in-process mode's containers are under a root of
// their own (runc.LibcontainerRoot); the binaries' share runc's, and
// ociFile says which binary. Nodelets older than ociFile ran runc.
func previousOCI(stateDir, dir string) (name, root string) {
	if lib := runc.LibcontainerRoot(dir); hasEntries(lib) {
		return OCILibcontainer, lib
	}
	root = filepath.Join(dir, "runc")
	if !hasEntries(root) {
		return "", root
	}
	b, err := os.ReadFile(filepath.Join(stateDir, ociFile))
	if err != nil {
		return OCIRunc, root
	}
	switch name := strings.TrimSpace(string(b)); name {
	case OCICrun, OCIRunc:
		return name, root
	}
	return OCIRunc, root
}

// ociRunDir is where the runc driver keeps its OCI runtime's state and
// the overlays' mountpoints: RunDir, unless containers that a nodelet
// from before RunDir left running remain under StateDir, in which case
// StateDir, as before, until they are gone (a restart after moves on).
func (c Config) ociRunDir() string {
	for _, legacy := range []string{runc.LibcontainerRoot(c.StateDir), filepath.Join(c.StateDir, "runc")} {
		if hasEntries(legacy) {
			return c.StateDir
		}
	}
	return c.RunDir
}

// hasEntries reports whether dir exists and is not empty.
func hasEntries(dir string) bool {
	ents, err := os.ReadDir(dir)
	return err == nil && len(ents) > 0
}

// newRunc starts the runc driver with binary ("": runc, see runc.Find)
// and records which OCI runtime its containers belong to (previousOCI).
func newRunc(c Config, binary, runDir string) (*runc.Runtime, error) {
	r, err := runc.NewIn(binary, c.StateDir, runDir)
	if err != nil {
		return nil, err
	}
	name := OCIRunc
	if filepath.Base(binary) == OCICrun {
		name = OCICrun
	}
	if err := os.WriteFile(filepath.Join(c.StateDir, ociFile), []byte(name+"\n"), 0o600); err != nil {
		return nil, err
	}
	return r, nil
}

// findBinary looks name up on $PATH, else in the usual system places.
func findBinary(name string) (string, error) {
	for _, cand := range []string{name, "/usr/sbin/" + name, "/usr/bin/" + name, "/usr/local/sbin/" + name, "/usr/local/bin/" + name} {
		if p, err := exec.LookPath(cand); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on $PATH or in /usr/sbin, /usr/bin, /usr/local/sbin, /usr/local/bin", name)
}

// findTool returns the host path of one of troupe's container tools
// (troupe-init, troupe-ssh): path, else name next to the executable.
func findTool(name, path string) (string, error) {
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("locating %s: %w", name, err)
		}
		path = filepath.Join(filepath.Dir(exe), name)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s not found or not executable at %s (build cmd/%s or name it with a flag)", name, abs, name)
	}
	return abs, nil
}

// memTotal reads MemTotal from /proc/meminfo, in bytes.
func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("reading node memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("meminfo: %w", err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("meminfo: no MemTotal")
}

// advertise picks the address containers are reached at: 127.0.0.1 when
// schedd is local (a unix socket or a loopback host: a dev cluster on one
// machine), else the first non-loopback IPv4 address of this node.
func advertise(addr string) string {
	const loop = "127.0.0.1"
	if isLocal(addr) {
		return loop
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	return loop
}

func isLocal(addr string) bool {
	if strings.HasPrefix(addr, "unix://") || strings.HasPrefix(addr, "/") {
		return true
	}
	host := addr
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		host = u.Host
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
