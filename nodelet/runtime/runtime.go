// Package runtime defines the one interface every container runtime of the
// nodelet implements (runc, which also runs OCI and SIF images; apptainer;
// process), and the Spec
// a container is started from.
//
// Ownership and lifetime, for every driver:
//
//   - Start returns only once the container's process exists (or failed to);
//     a nil error means the caller now owns a Container and must call
//     Destroy on it exactly when it no longer needs it (Destroy is
//     idempotent, so calling it again is harmless).
//   - Spec.Stdout and Spec.Stderr stay owned by the caller: the driver hands
//     duplicates to the container, so the caller may close its files as
//     soon as Start returns.
//   - Spec.Dir is owned by the driver from Start on: it writes the bundle,
//     rootfs and home there, and Destroy removes it.
//   - Wait may be called any number of times, from any goroutine; every
//     call returns the same Exit.
//   - Destroy kills whatever still runs, releases every kernel object the
//     container held (processes, mounts, cgroups) and removes Spec.Dir.
//
// It imports no troupe package: drivers import it, never the other way.
package runtime

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// ImageHost names the node's own tree, mounted read-only.
const ImageHost = "host"

// InitPath is where troupe-init is mounted inside every isolated container.
const InitPath = "/.troupe/bin/troupe-init"

// HomeDir is the per-container writable home inside the container.
const HomeDir = "/home/work"

// Errors drivers wrap so that callers can tell cases apart with errors.Is.
var (
	// ErrNotRunning: the container's process has already exited.
	ErrNotRunning = errors.New("container not running")
	// ErrUnsupported: the driver cannot honour this part of the Spec.
	ErrUnsupported = errors.New("not supported by this runtime")
	// ErrInvalidSpec: the Spec is missing a required field or is malformed.
	ErrInvalidSpec = errors.New("invalid container spec")
	// ErrNotFound: Recover found no such container (it is gone).
	ErrNotFound = errors.New("no such container")
	// ErrMountTarget: a job's mount target leads, inside the container's
	// root, onto or under a reserved path (ReservedTargets), or through
	// something its user could change while the container starts.
	ErrMountTarget = errors.New("mount target refused")
)

// ReservedTargets are the container paths no job's mount may land on or
// under ("/" itself only): troupe's own files (troupe-init among them,
// which holds the root-owned exit file and terminal descriptors as the
// container's first process) and the kernel's file systems.
var ReservedTargets = []string{"/", "/proc", "/sys", "/dev", "/.troupe", "/etc/hosts", "/etc/hostname"}

// ReservedBy returns the reserved path p is on or under (r "/" only when
// p is "/"), and whether there is one. p must be clean and absolute.
func ReservedBy(p string, reserved []string) (string, bool) {
	for _, r := range reserved {
		if p == r || (r != "/" && strings.HasPrefix(p, r+"/")) {
			return r, true
		}
	}
	return "", false
}

// Runtime starts containers on this node.
type Runtime interface {
	// Name is the runtime's name as schedd shows it ("runc", "process").
	Name() string
	// Start creates and starts a container. ctx bounds the start only;
	// cancelling it later does not stop the container.
	Start(ctx context.Context, spec Spec) (Container, error)
	// Recover re-attaches to container id, started with Spec.Dir dir by
	// an earlier nodelet (or an earlier Runtime value) on this node. The
	// Container behaves as the one Start returned: Wait returns its exit,
	// even when it ended while nobody watched, Signal and Destroy work.
	// Errors wrap ErrNotFound when the runtime no longer knows id, and
	// ErrUnsupported when the driver's containers do not outlive the
	// nodelet (process, apptainer).
	Recover(ctx context.Context, id, dir string) (Container, error)
	// Cleanup removes what a previous nodelet run left behind under this
	// runtime's state: every container it knows except those this value
	// started or recovered. Call it after Recover, before the first Start.
	Cleanup(ctx context.Context) error
}

// Container is one started container.
type Container interface {
	// ID is Spec.ID.
	ID() string
	// Wait blocks until the container's main process exits or ctx ends.
	Wait(ctx context.Context) (Exit, error)
	// Signal sends sig to the container's main process (for isolated
	// runtimes troupe-init, which forwards it to the command's process
	// group). It returns an error wrapping ErrNotRunning once the
	// container has exited.
	Signal(sig syscall.Signal) error
	// Usage is what the container's processes have used: once Wait has
	// returned, in all (read as the main process ended, before Destroy
	// releases the cgroup); before that, so far. Zero where the driver
	// cannot tell.
	Usage() Usage
	// Destroy kills every process of the container, waits for them,
	// and releases mounts, cgroups and Spec.Dir. It is idempotent and
	// safe to call concurrently with Wait.
	Destroy(ctx context.Context) error
}

// Terminal is a container started with Spec.TTY.
type Terminal interface {
	// DialTerminal connects to the unix socket troupe-init serves the
	// container's terminal on (package attach). The driver binds it in
	// a root-owned directory of its own that the container cannot see,
	// hands it to troupe-init as an inherited descriptor, and connects
	// with attach.DialPeer: no symlink is followed and the listener
	// must be the container's init (attach.ErrUntrusted otherwise).
	// Errors wrap fs.ErrNotExist when there is no terminal and
	// syscall.ECONNREFUSED while troupe-init does not serve it (yet, or
	// any more).
	DialTerminal() (net.Conn, error)
}

// Exit is how a container ended.
type Exit struct {
	// Code is the exit status; 128+n when killed by signal n (as shells
	// report it).
	Code int
	// Signal is the signal that killed the main process, when the runtime
	// can tell; 0 otherwise.
	Signal syscall.Signal
	// OOM is set when the kernel's OOM killer killed a process of the
	// container for exceeding its memory limit (runtimes with cgroups).
	OOM bool
	// At is when the main process ended, by this node's clock: also for
	// a container that ended while no nodelet watched it (Recover), as
	// far as the runtime recorded it; zero when it cannot tell.
	At time.Time
}

// Usage is a container's resource use.
type Usage struct {
	// CPU is user + system time (cgroup cpuacct.usage or cpu.stat
	// usage_usec; the process driver: the leader's rusage).
	CPU time.Duration
	// MemPeak is the peak memory in bytes (cgroup
	// memory.max_usage_in_bytes or memory.peak; rusage's max RSS).
	MemPeak int64
}

// Mount is a bind mount of a host file or directory into the container.
type Mount struct {
	Source   string // absolute host path (file or directory)
	Target   string // absolute path in the container
	ReadOnly bool
	// Layered: Source is at Target in Spec.Layer too. A driver that lays
	// Spec.Layer over the container's root skips the mount.
	Layered bool
	// Job is the name of the job's mount block this mount comes from;
	// empty for the node's own. An isolated driver resolves a job's
	// Target inside the container's root, through the image's symbolic
	// links and the mounts before it, mounts at the resolved path, and
	// refuses (ErrMountTarget) one that lands on or under a
	// ReservedTargets path as resolved there too.
	Job string
}

// Spec describes a container to start. Zero values are noted per field.
type Spec struct {
	// ID names the container on this node; unique among live containers.
	// Letters, digits, '-', '_' and '.' only. Required.
	ID string
	// Hostname inside the container (main1, sub1, ...). Empty: the ID.
	Hostname string
	// Image is ImageHost or an absolute path: a rootfs directory, an OCI
	// layout, a docker-save or OCI archive, or a SIF (see package image;
	// process supports ImageHost only). Empty: ImageHost.
	Image string
	// ImageAsUser: Image is a path the job named, not the node's choice.
	// A driver that reads the files inside it (runc: an OCI layout's
	// index.json and blobs) opens each with UID's and GID's credentials
	// (and the user's groups), through no symbolic link. False: the
	// node's own reads (a catalog image).
	ImageAsUser bool
	// Args is the command. Empty: wait until signalled (troupe-init wait).
	Args []string
	// Env is the complete environment, "KEY=value" entries.
	Env []string
	// Workdir is the working directory inside. Empty: HomeDir.
	Workdir string
	// UID and GID the process runs as.
	UID, GID int
	// CPUMilli is the CPU limit in millicores (500 = half a core), as
	// the scheduler placed the container. 0: unlimited.
	CPUMilli int64
	// CPUs are the node's CPUs (as /proc/self/status's Cpus_allowed_list
	// numbers them) the container's processes may run on: its own
	// cores, so that MPI's binding in two containers never lands on the
	// same one. Empty: any. runc only; the process and apptainer drivers
	// ignore it.
	CPUs []int
	// Memory limit in bytes. 0: unlimited.
	Memory int64
	// Pids caps the container's tasks (fork bombs). 0: the driver's
	// default (runc: 4096).
	Pids int64
	// Mounts are bind mounts, applied in order after the image's own.
	Mounts []Mount
	// Layer is a directory whose files the container sees at the same
	// paths, read-only (the node's files for the container and its
	// tools), each also in Mounts, marked Layered, or in Init
	// (InitLayered). The runc driver makes it the top lower layer of an
	// image's overlay root, where it costs no mount at the container's
	// start; the others, and runc for the host image, bind-mount those
	// entries instead. Empty: none.
	Layer string
	// Stdout and Stderr receive the container's output. Nil: discarded.
	Stdout, Stderr *os.File
	// Dir is a directory the driver owns for this container (bundle,
	// rootfs, home). It is created when missing; Destroy removes it.
	// Required. It holds only what the container needs while it exists
	// (a tmpfs suits it), unless Home is empty.
	Dir string
	// Home is the host directory mounted as the container's writable
	// home (HomeDir): the driver creates it, owned by UID:GID, when
	// missing. The job writes there, so it belongs on disk; Destroy
	// leaves it to the caller. Empty: Dir/home, which Destroy removes.
	Home string
	// Init is the host path of the troupe-init binary. Required by
	// isolated runtimes, and by every runtime when Args is empty.
	Init string
	// InitLayered: Init is at InitPath in Layer too (see Layered).
	InitLayered bool
	// InitArgs are extra troupe-init options put before its mode (e.g.
	// --sshd PATH); isolated runtimes only.
	InitArgs []string
	// NetNS is the path of a network namespace the container joins (a
	// pinned one, see package network). Empty: the node's own network.
	NetNS string
	// TTY runs Args on a pseudo-terminal that troupe-init serves to
	// attach clients (bsub -I, battach) on a unix socket the Container
	// connects to as a Terminal. Needs Init and Args; runc and process
	// only.
	TTY bool
	// Devices are host device nodes (GPUs) the container may use: runc
	// creates them at the same path and allows them in the device
	// cgroup; the process and apptainer drivers see the host's /dev
	// anyway.
	Devices []Device
}

// Device is a host device node, as DeviceAt reads it.
type Device struct {
	Path         string // absolute, the same inside the container
	Type         string // "c" or "b"
	Major, Minor int64
	Mode         os.FileMode // permission bits
	UID, GID     uint32
}

// Freezer is a container whose processes can all be frozen at once and
// thawed again through the cgroup freezer (the runc driver's): frozen,
// none of them runs, each keeps its memory, and signals sent meanwhile
// are delivered as it thaws. Unlike SIGSTOP it cannot be caught, undone
// from inside or missed by a process forked in the meantime.
type Freezer interface {
	// Freeze returns once every process of the container is frozen.
	// Errors wrap ErrNotRunning once the container has exited.
	Freeze(ctx context.Context) error
	// Thaw lets a frozen container's processes run again.
	Thaw(ctx context.Context) error
}
