package runc

import (
	"path/filepath"
	"strconv"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/troupe-hpc/troupe/internal/attach"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// ociVersion is the runtime spec version bundles declare: the 1.0
// series has every field ociSpec writes, and crun 1.8 refuses a version
// newer than it knows (specs.Version, 1.3.0, included) where runc does
// not mind.
const ociVersion = "1.0.2"

// cpuPeriod is the CFS period, in microseconds, quotas are expressed in.
const cpuPeriod = 100000

// minQuota is the smallest CFS quota, in microseconds, the kernel takes
// (cpu.cfs_quota_us and cpu.max refuse less with EINVAL).
const minQuota = 1000

// CPUQuota is the CFS quota, in microseconds per cpuPeriod, of a limit of
// milli millicores: 100 µs a millicore, never below the kernel's minimum
// (a container of 1 to 9 millicores gets 1 ms per 100 ms).
func CPUQuota(milli int64) int64 {
	return max(milli*(cpuPeriod/1000), minQuota)
}

// pidsLimit caps the number of tasks in one container.
const pidsLimit = 4096

// rootCaps is the capability set of `runc spec`, kept for uid 0 only.
var rootCaps = []string{"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"}

// Masked and read-only paths, as in runc's default template.
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
		"/proc/sched_debug", "/sys/firmware", "/proc/scsi",
	}
	readonlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
)

// layout is where one container's files live on the host, under Spec.Dir
// (its home: Spec.Home when set).
type layout struct {
	dir, homeDir string
}

func newLayout(s runtime.Spec) layout { return layout{dir: s.Dir, homeDir: s.Home} }

func (l layout) bundle() string { return filepath.Join(l.dir, "bundle") }

func (l layout) home() string {
	if l.homeDir != "" {
		return l.homeDir
	}
	return filepath.Join(l.dir, "home")
}

// skeleton is the ImageHost root: top-level directories only, in the
// bundle (buildHostRootfs).
func (l layout) skeleton() string { return filepath.Join(l.dir, "bundle", "rootfs") }

// upper and work are the overlay's writable layer over an image: where
// runc makes the mountpoints the image lacks, never in the image itself.
func (l layout) upper() string { return filepath.Join(l.dir, "overlay", "upper") }
func (l layout) work() string  { return filepath.Join(l.dir, "overlay", "work") }

// private is root's own directory of the container (0700, mounted
// nowhere): the attach socket and the exit file live there, handed to
// troupe-init as inherited descriptors, so no job can replace them.
func (l layout) private() string    { return filepath.Join(l.dir, "private") }
func (l layout) exitFile() string   { return filepath.Join(l.private(), "exit") }
func (l layout) attachSock() string { return filepath.Join(l.private(), attach.SocketName) }

// The descriptors troupe-init inherits (runc run --preserve-fds).
const (
	exitFD = 3 // the exit file, always
	ttyFD  = 4 // the bound attach socket, Spec.TTY only
)

// ociSpec builds the OCI config for s. hostDirs are the image's read-only
// bind mounts (empty for a rootfs image); layered: root is an overlay
// with s.Layer among its lower layers.
func ociSpec(s runtime.Spec, l layout, root string, hostDirs []string, layered bool) *specs.Spec {
	hostname := s.Hostname
	if hostname == "" {
		hostname = s.ID
	}
	ns := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace}, {Type: specs.MountNamespace},
		{Type: specs.UTSNamespace}, {Type: specs.IPCNamespace},
		// Its own cgroup namespace: /proc/self/cgroup reads "/" and
		// /sys/fs/cgroup shows the container's own cgroups, so that
		// hwloc (Open MPI's binding) finds its cpuset and binds within
		// Spec.CPUs, as in a Docker container.
		{Type: specs.CgroupNamespace},
	}
	if s.NetNS != "" {
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: s.NetNS})
	}
	return &specs.Spec{
		Version:  ociVersion,
		Hostname: hostname,
		Root:     &specs.Root{Path: root, Readonly: true},
		Process:  process(s),
		Mounts:   mounts(s, l, hostDirs, layered),
		Linux: &specs.Linux{
			Devices:       devices(s.Devices),
			CgroupsPath:   "/troupe/" + s.ID,
			Resources:     resources(s),
			Namespaces:    ns,
			MaskedPaths:   maskedPaths,
			ReadonlyPaths: readonlyPaths,
			Seccomp:       seccompProfile(),
		},
	}
}

func process(s runtime.Spec) *specs.Process {
	args := append([]string{runtime.InitPath}, s.InitArgs...)
	args = append(args, "--exit-fd", strconv.Itoa(exitFD))
	if s.TTY {
		args = append(args, "--tty-fd", strconv.Itoa(ttyFD))
	}
	if len(s.Args) > 0 {
		args = append(append(args, "run", "--"), s.Args...)
	} else {
		args = append(args, "wait")
	}
	caps := &specs.LinuxCapabilities{}
	if s.UID == 0 {
		caps = &specs.LinuxCapabilities{
			Bounding: rootCaps, Effective: rootCaps, Permitted: rootCaps,
		}
	}
	return &specs.Process{
		User:            specs.User{UID: uint32(s.UID), GID: uint32(s.GID)},
		Args:            args,
		Env:             s.Env,
		Cwd:             s.WorkdirOrHome(),
		Capabilities:    caps,
		NoNewPrivileges: true,
		Rlimits:         nofile(),
	}
}

// nofile raises the open-files soft limit to the nodelet's own hard
// limit (MPI and data loaders open many files); it cannot go higher.
func nofile() []specs.POSIXRlimit {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return nil
	}
	return []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: rl.Max, Soft: rl.Max}}
}

// devices are the GPU device nodes runc creates in the container.
func devices(ds []runtime.Device) []specs.LinuxDevice {
	var out []specs.LinuxDevice
	for _, d := range ds {
		mode, uid, gid := d.Mode, d.UID, d.GID
		out = append(out, specs.LinuxDevice{Path: d.Path, Type: d.Type, Major: d.Major, Minor: d.Minor,
			FileMode: &mode, UID: &uid, GID: &gid})
	}
	return out
}

func resources(s runtime.Spec) *specs.LinuxResources {
	pids := int64(pidsLimit)
	if s.Pids > 0 {
		pids = s.Pids
	}
	r := &specs.LinuxResources{
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
		Pids:    &specs.LinuxPids{Limit: &pids},
	}
	for _, d := range s.Devices {
		major, minor := d.Major, d.Minor
		r.Devices = append(r.Devices, specs.LinuxDeviceCgroup{
			Allow: true, Type: d.Type, Major: &major, Minor: &minor, Access: "rwm"})
	}
	if s.CPUMilli > 0 {
		quota := CPUQuota(s.CPUMilli)
		period := uint64(cpuPeriod)
		r.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
	}
	if len(s.CPUs) > 0 {
		if r.CPU == nil {
			r.CPU = &specs.LinuxCPU{}
		}
		r.CPU.Cpus = runtime.CPUList(s.CPUs) // the cpuset cgroup; mems stay the parent's
	}
	if s.Memory > 0 {
		limit := s.Memory
		r.Memory = &specs.LinuxMemory{Limit: &limit}
	}
	return r
}

// mounts are the container's mounts; layered: s.Layer is a lower layer
// of its root, which holds the Layered mounts (and the init, with
// InitLayered) already.
func mounts(s runtime.Spec, l layout, hostDirs []string, layered bool) []specs.Mount {
	ms := standardMounts()
	for _, d := range hostDirs {
		ms = append(ms, bind(d, d, true))
	}
	ms = append(ms,
		specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs",
			Options: []string{"nosuid", "nodev", "mode=1777"}},
		bind(l.home(), runtime.HomeDir, false),
	)
	if !layered || !s.InitLayered {
		ms = append(ms, bind(s.Init, runtime.InitPath, true))
	}
	for _, m := range s.Mounts {
		if !layered || !m.Layered {
			ms = append(ms, bind(m.Source, m.Target, m.ReadOnly))
		}
	}
	return ms
}

func bind(src, dst string, ro bool) specs.Mount {
	opts := []string{"bind", "nosuid", "nodev"}
	if ro {
		opts = append(opts, "ro")
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: opts}
}

// standardMounts are /proc, /dev and /sys as in runc's default template.
func standardMounts() []specs.Mount {
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs",
			Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts",
			Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm",
			Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue",
			Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs",
			Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup",
			Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
	}
}

func (l layout) log() string     { return filepath.Join(l.dir, "bundle", "runc.log") }
func (l layout) pidFile() string { return filepath.Join(l.dir, "bundle", "pid") }
