package runc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// cgroupBase is where the cgroup hierarchies are mounted.
const cgroupBase = "/sys/fs/cgroup"

// readUsage reads container id's CPU time and peak memory from its
// cgroups: cgroup v1 cpuacct.usage (ns) and memory.max_usage_in_bytes,
// v2 cpu.stat usage_usec and memory.peak. What is missing reads 0.
func readUsage(base, id string) runtime.Usage {
	var u runtime.Usage
	v2 := filepath.Join(base, "troupe", id)
	if n, ok := readInt(filepath.Join(base, "cpuacct", "troupe", id, "cpuacct.usage")); ok {
		u.CPU = time.Duration(n)
	} else if n, ok := readInt(filepath.Join(base, "cpu,cpuacct", "troupe", id, "cpuacct.usage")); ok {
		u.CPU = time.Duration(n)
	} else if b, err := os.ReadFile(filepath.Join(v2, "cpu.stat")); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				u.CPU = time.Duration(n) * time.Microsecond
			}
		}
	}
	if n, ok := readInt(filepath.Join(base, "memory", "troupe", id, "memory.max_usage_in_bytes")); ok {
		u.MemPeak = n
	} else if n, ok := readInt(filepath.Join(v2, "memory.peak")); ok {
		u.MemPeak = n
	}
	return u
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// Usage implements runtime.Container: read from the cgroups as init
// exited, or now while it runs.
func (c *container) Usage() runtime.Usage {
	select {
	case <-c.done:
		return c.usage
	default:
		return readUsage(cgroupBase, c.id)
	}
}
