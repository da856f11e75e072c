package runc

import (
	goruntime "runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// deniedSyscalls are refused (EPERM) in every container, whatever its
// user: what Docker's default profile allows only with a capability no
// troupe job has (CAP_SYS_ADMIN, CAP_SYS_MODULE, CAP_SYS_BOOT,
// CAP_SYS_TIME, CAP_SYSLOG, CAP_SYS_PTRACE...) or never allows. The
// kernel would refuse most of them anyway for lack of the capability;
// the filter also closes what an unprivileged user may otherwise do:
// keyrings shared with the host (keyctl and friends are not namespaced),
// new user namespaces (unshare -U, the gateway to most kernel exploits),
// mounts in them, BPF and perf events, userfaultfd.
var deniedSyscalls = []string{
	// keyrings
	"keyctl", "add_key", "request_key",
	// namespaces and mounts
	"unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	// kernel interfaces and attack surface
	"bpf", "perf_event_open", "userfaultfd", "kcmp", "lookup_dcookie",
	"open_by_handle_at", "name_to_handle_at",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"create_module", "query_module", "get_kernel_syms",
	// the machine itself
	"acct", "swapon", "swapoff", "reboot", "syslog", "vhangup",
	"settimeofday", "stime", "clock_settime", "clock_adjtime", "adjtimex",
	"iopl", "ioperm", "quotactl", "nfsservctl", "vm86", "vm86old", "uselib",
	"_sysctl", "sysfs", "ustat",
}

// cloneNamespaceFlags are the namespace flags clone(2) may not carry.
// (CLONE_NEWTIME shares its bit with clone's exit signal, and only
// unshare and clone3 take it: both are refused whole.)
var cloneNamespaceFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
	unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET,
}

// seccompProfile is every container's filter, in the spirit of Docker's
// default profile but written as a deny list: everything a batch job or
// MPI uses (ptrace of its own processes, process_vm_readv for shared-
// memory transports, personality, io_uring) stays allowed; deniedSyscalls
// fail with EPERM, clone with a namespace flag too, and clone3, whose
// flags a filter cannot read, fails with ENOSYS so that the C library
// falls back to clone. The native architecture's compat ABIs are listed
// so that the rules hold for 32-bit calls too.
func seccompProfile() *specs.LinuxSeccomp {
	eperm, enosys := uint(unix.EPERM), uint(unix.ENOSYS)
	s := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: arches(),
		Syscalls: []specs.LinuxSyscall{
			{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		},
	}
	flagsArg := uint(0) // clone's flags (the second argument on s390x only)
	if goruntime.GOARCH == "s390x" {
		flagsArg = 1
	}
	for _, f := range cloneNamespaceFlags {
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{
			Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: flagsArg, Value: f, ValueTwo: f, Op: specs.OpMaskedEqual}},
		})
	}
	return s
}

// arches are the native architecture and its compat ABIs.
func arches() []specs.Arch {
	switch goruntime.GOARCH {
	case "amd64":
		return []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	case "arm64":
		return []specs.Arch{specs.ArchAARCH64, specs.ArchARM}
	case "ppc64le":
		return []specs.Arch{specs.ArchPPC64LE}
	case "s390x":
		return []specs.Arch{specs.ArchS390X, specs.ArchS390}
	case "riscv64":
		return []specs.Arch{specs.ArchRISCV64}
	}
	return nil
}
