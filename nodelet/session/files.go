package session

import (
	"fmt"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
)

// Hosts returns /etc/hosts for every container of job: localhost first,
// then one line per container, in rank order, with the address its node
// advertises. Containers not placed yet (no NodeAddr) are left out.
func Hosts(job api.AssignedJob) string { return HostsWith(job, Features{}) }

// HostsWith is Hosts for a container with features f: on a session
// network every container is named by its session address
// (Container.Addr) instead of its node's.
func HostsWith(job api.AssignedJob, f Features) string {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	for _, c := range byRank(job.Containers) {
		addr := c.NodeAddr
		if f.SessionNet {
			addr = c.Addr
		}
		if addr == "" {
			continue
		}
		fmt.Fprintf(&b, "%s\t%s\n", addr, c.Host)
	}
	return b.String()
}

// Hostname returns /etc/hostname for host.
func Hostname(host string) string { return host + "\n" }

// OutputPath is where job's container host writes its output: the
// job file's output pattern expanded for it (jobspec.Job.OutputPath).
func OutputPath(job api.AssignedJob, host string) (string, error) {
	return job.Spec.OutputPath(job.OutputVars(host))
}

// ErrorPath is where it writes its stderr, "" when that joins its
// output (jobspec.Job.ErrorPath).
func ErrorPath(job api.AssignedJob, host string) (string, error) {
	return job.Spec.ErrorPath(job.OutputVars(host))
}
