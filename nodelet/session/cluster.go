package session

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
)

// Where troupe puts its tools and the session's files inside an
// isolated container (runc), and the port its sshd listens on.
const (
	ToolsDir = "/.troupe/bin"
	SSHPath  = ToolsDir + "/ssh"        // troupe-ssh as the ssh client
	SSHDPath = ToolsDir + "/troupe-ssh" // troupe-ssh; `troupe-ssh server` is sshd
	// SlurmDir holds only troupe-slurm as srun. It goes first on PATH:
	// inside a troupe job a site's own Slurm srun (on the node's tree
	// of a script job) has no allocation to run in.
	SlurmDir   = "/.troupe/slurm"
	SrunPath   = SlurmDir + "/srun"
	SessionDir = "/.troupe/session"
	// HostfileOpenMPI is "main1 slots=4", one line per container.
	HostfileOpenMPI = SessionDir + "/hostfile"
	// HostfileMPICH is "main1:4", one line per container.
	HostfileMPICH = SessionDir + "/hostfile.mpich"
	// HostfileLSF is LSB_DJOB_HOSTFILE: one line per slot.
	HostfileLSF = SessionDir + "/djob_hostfile"
	SSHDir      = "/home/work/.ssh"
	SSHPort     = 2200
)

// Features is what the container's runtime provides beyond the
// environment.
type Features struct {
	// SessionNet: the container is on its session's private network at
	// its Container.Addr, interface Iface; /etc/hosts names those
	// addresses.
	SessionNet bool
	Iface      string
	// Tools: troupe-ssh is at SSHPath with sshd on SSHPort, the hostfiles
	// at SessionDir and the session's key in SSHDir.
	Tools bool
	// Hostfiles: the hostfiles are at SessionDir and LSF's host lists in
	// the environment, without SSH (a one-container session that did not
	// ask for it: mpirun and LSF scripts there still count its slots).
	// Tools implies it.
	Hostfiles bool
	// Srun: troupe-slurm is at SrunPath (local tasks run directly, other
	// containers' through troupe's ssh, so those need Tools), or, when
	// SlurmDir is set, srun is in that directory of the host's (plain
	// processes, which see the host's files).
	Srun     bool
	SlurmDir string
}

// HasHostfiles tells whether f gives the container the session's
// hostfiles and LSF's host variables.
func (f Features) HasHostfiles() bool { return f.Tools || f.Hostfiles }

// Slots is how many MPI slots a container offers: its whole cores, at
// least one.
func Slots(c api.Container) int {
	return max(1, int(c.Milli()/1000))
}

// clusterEnv is what the hostfiles and ssh make possible, in layer 3
// (the job cannot override it): LSF's host lists, the hostfile paths.
func clusterEnv(job api.AssignedJob) map[string]string {
	var hosts, mcpu []string
	total := 0
	for _, c := range byRank(job.Containers) {
		n := Slots(c)
		total += n
		for range n {
			hosts = append(hosts, c.Host)
		}
		mcpu = append(mcpu, c.Host, strconv.Itoa(n))
	}
	return map[string]string{
		"LSB_HOSTS":             strings.Join(hosts, " "),
		"LSB_MCPU_HOSTS":        strings.Join(mcpu, " "),
		"LSB_DJOB_HOSTFILE":     HostfileLSF,
		"LSB_DJOB_NUMPROC":      strconv.Itoa(total),
		"TROUPE_HOSTFILE":       HostfileOpenMPI,
		"TROUPE_MPICH_HOSTFILE": HostfileMPICH,
	}
}

// mpiDefaults are layer 1 (the job may override them): OpenMPI (ORTE,
// 4.x), PRRTE (OpenMPI 5) and MPICH's Hydra launch through troupe's ssh
// with the session's hostfile by default; MPI and NCCL/Gloo traffic
// stays on the session interface.
func mpiDefaults(f Features) map[string]string {
	env := map[string]string{}
	if f.HasHostfiles() {
		for k, v := range map[string]string{
			"OMPI_MCA_orte_default_hostfile":           HostfileOpenMPI,
			"PRTE_MCA_prte_default_hostfile":           HostfileOpenMPI,
			"HYDRA_HOST_FILE":                          HostfileMPICH,
			"OMPI_MCA_btl_vader_single_copy_mechanism": "none", // no CMA across a container's pid namespace
			// Every container also carries SLURM_* (slurmEnv) for scripts
			// written for Slurm; MPI must not take them for a Slurm
			// allocation: the hostfile is the session's one list of hosts.
			"OMPI_MCA_ras": "^slurm",
			"PRTE_MCA_ras": "^slurm",
			"HYDRA_RMK":    "user",
		} {
			env[k] = v
		}
	}
	if f.Tools {
		for k, v := range map[string]string{
			"OMPI_MCA_plm_rsh_agent": SSHPath,
			"PRTE_MCA_plm_ssh_agent": SSHPath,
			// Launch through SSH even though SLURM_* is set (Open MPI
			// would otherwise start its daemons with srun).
			"OMPI_MCA_plm":        "rsh",
			"PRTE_MCA_plm":        "ssh",
			"HYDRA_LAUNCHER":      "ssh",
			"HYDRA_LAUNCHER_EXEC": SSHPath,
		} {
			env[k] = v
		}
	}
	if f.SessionNet && f.Iface != "" {
		for _, k := range []string{
			"OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include",
			"PRTE_MCA_oob_tcp_if_include", "HYDRA_IFACE",
			"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME",
		} {
			env[k] = f.Iface
		}
	}
	return env
}

// HostfileOpenMPIText is the OpenMPI hostfile of job.
func HostfileOpenMPIText(job api.AssignedJob) string {
	var b strings.Builder
	for _, c := range byRank(job.Containers) {
		fmt.Fprintf(&b, "%s slots=%d\n", c.Host, Slots(c))
	}
	return b.String()
}

// HostfileMPICHText is the MPICH (Hydra) hostfile of job.
func HostfileMPICHText(job api.AssignedJob) string {
	var b strings.Builder
	for _, c := range byRank(job.Containers) {
		fmt.Fprintf(&b, "%s:%d\n", c.Host, Slots(c))
	}
	return b.String()
}

// HostfileLSFText is LSB_DJOB_HOSTFILE's content: a host per slot.
func HostfileLSFText(job api.AssignedJob) string {
	var b strings.Builder
	for _, c := range byRank(job.Containers) {
		for range Slots(c) {
			b.WriteString(c.Host + "\n")
		}
	}
	return b.String()
}
