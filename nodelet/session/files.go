package session

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
)

// DefaultOutput is the output pattern of a job that names none;
// DefaultArrayOutput that of an element of a job array (one file per
// element, as Slurm's slurm-%A_%a.out).
const (
	DefaultOutput      = "troupe-%j.%h.out"
	DefaultArrayOutput = "troupe-%j_%I.%h.out"
)

// Hosts returns /etc/hosts for every container of job: localhost first,
// then one line per container, in rank order, with the address its node
// advertises. Containers not placed yet (no NodeAddr) are left out.
func Hosts(job api.Job) string { return HostsWith(job, Features{}) }

// HostsWith is Hosts for a container with features f: on a session
// network every container is named by its session address
// (Container.Addr) instead of its node's.
func HostsWith(job api.Job, f Features) string {
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

// OutputPath expands job's output pattern for host: %j job id, %h host,
// %u user name, %I and %a an array element's index (0 for a job not in
// an array), %A the array's id (the job's for another), %% a literal %;
// an unknown %x stays as written. For an element of a job array %j is
// the array's id, as bsub said it and as LSF's %J is. A relative result
// is resolved against the job's submit directory.
func OutputPath(job api.Job, host string) (string, error) {
	pattern := job.Spec.Output
	switch {
	case pattern != "":
	case job.ArrayID != 0:
		pattern = DefaultArrayOutput
	default:
		pattern = DefaultOutput
	}
	return filePath(job, host, "output", pattern)
}

// ErrorPath expands job's error pattern (bsub -e) as OutputPath does; ""
// when the job names none and stderr joins stdout.
func ErrorPath(job api.Job, host string) (string, error) {
	if job.Spec.Error == "" {
		return "", nil
	}
	return filePath(job, host, "error", job.Spec.Error)
}

func filePath(job api.Job, host, what, pattern string) (string, error) {
	id, idx := job.ID, 0
	if job.ArrayID != 0 {
		id, idx = job.ArrayID, job.ArrayIndex
	}
	p := expand(pattern, map[byte]string{
		'j': strconv.FormatUint(id, 10),
		'A': strconv.FormatUint(id, 10),
		'I': strconv.Itoa(idx),
		'a': strconv.Itoa(idx),
		'h': host,
		'u': job.User,
		'%': "%",
	})
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	if !filepath.IsAbs(job.Cwd) {
		return "", fmt.Errorf("%s %q is relative and job %d has no absolute cwd (%q)", what, p, job.ID, job.Cwd)
	}
	return filepath.Join(job.Cwd, p), nil
}

func expand(pattern string, subst map[byte]string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		if pattern[i] != '%' || i+1 == len(pattern) {
			b.WriteByte(pattern[i])
			continue
		}
		if v, ok := subst[pattern[i+1]]; ok {
			b.WriteString(v)
			i++
			continue
		}
		b.WriteByte('%')
	}
	return b.String()
}
