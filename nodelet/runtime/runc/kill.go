package runc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/troupe-hpc/troupe/internal/backoff"
)

// freezeWait bounds waiting for a cgroup to report itself frozen; the
// kill goes on after it regardless (tasks that did not freeze in time
// get the signal as well).
const freezeWait = 5 * time.Second

// ErrKillStuck means tasks of a container's cgroup outlived killAll.
var ErrKillStuck = errors.New("container tasks survive SIGKILL")

// killAll ends every task of container id's cgroup (under base), and
// returns once none is left or ctx ends. A fork bomb under a CPU quota
// would outlive a plain kill: each dying task needs CPU time the quota
// no longer grants, and new ones fork meanwhile. So: lift the CPU quota,
// freeze the cgroup (nothing forks), SIGKILL every task, thaw (they all
// die at once). cgroup v2 with cgroup.kill does the last three itself.
// A container without a cgroup, or whose cgroup is empty already (its
// init gone, and the kernel killed the rest of its PID namespace: the
// usual end), is no error, and is left as it is: freezing a cgroup v1
// flips a kernel static key (freezer_active), which patches the
// kernel's code on every CPU with an IPI each, twice a container.
func killAll(ctx context.Context, base, id string) error {
	cg := cgroupOf(base, id)
	if cg.procs == "" || len(readPids(cg.procs)) == 0 {
		return nil
	}
	if cg.quota != "" {
		_ = os.WriteFile(cg.quota, []byte(cg.noQuota), 0o644)
	}
	if cg.kill != "" && os.WriteFile(cg.kill, []byte("1"), 0o644) == nil {
		return waitEmpty(ctx, cg.procs)
	}
	frozen := cg.freeze != "" && os.WriteFile(cg.freeze, []byte(cg.frozenValue), 0o644) == nil
	if frozen {
		deadline := time.Now().Add(freezeWait)
		for !cg.isFrozen() && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	for range 3 { // tasks that forked before the freeze took hold
		pids := readPids(cg.procs)
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	if frozen {
		_ = os.WriteFile(cg.freeze, []byte(cg.thawedValue), 0o644)
	}
	return waitEmpty(ctx, cg.procs)
}

// waitEmpty polls a cgroup.procs file until it lists no task (or the
// cgroup is gone), killing what still appears there.
func waitEmpty(ctx context.Context, procs string) error {
	for {
		pids := readPids(procs)
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if err := backoff.Sleep(ctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("%w: %d tasks in %s: %w", ErrKillStuck, len(pids), filepath.Dir(procs), err)
		}
	}
}

// cgroupFiles are the files killAll uses in one container's cgroups;
// "" where this node has no such file.
type cgroupFiles struct {
	procs                    string // lists the tasks
	quota, noQuota           string // CPU quota file and its "unlimited"
	freeze                   string // freezer control
	frozenValue, thawedValue string
	state                    string // reads frozenState once frozen
	frozenState              string
	kill                     string // v2 cgroup.kill (Linux 5.14)
}

func (c cgroupFiles) isFrozen() bool {
	b, err := os.ReadFile(c.state)
	if err != nil {
		return true // gone: nothing left to wait for
	}
	return strings.Contains(string(b), c.frozenState)
}

// cgroupOf finds container id's cgroup files under base: the unified
// hierarchy when base is one, else the v1 controllers runc uses.
func cgroupOf(base, id string) cgroupFiles {
	exists := func(p string) string {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		return ""
	}
	if _, err := os.Stat(filepath.Join(base, "cgroup.controllers")); err == nil {
		dir := filepath.Join(base, "troupe", id)
		return cgroupFiles{
			procs: exists(filepath.Join(dir, "cgroup.procs")),
			quota: exists(filepath.Join(dir, "cpu.max")), noQuota: "max",
			freeze: exists(filepath.Join(dir, "cgroup.freeze")), frozenValue: "1", thawedValue: "0",
			state: filepath.Join(dir, "cgroup.events"), frozenState: "frozen 1",
			kill: exists(filepath.Join(dir, "cgroup.kill")),
		}
	}
	c := cgroupFiles{noQuota: "-1", frozenValue: "FROZEN", thawedValue: "THAWED", frozenState: "FROZEN"}
	for _, ctl := range []string{"cpu,cpuacct", "cpu"} {
		if p := exists(filepath.Join(base, ctl, "troupe", id, "cpu.cfs_quota_us")); p != "" {
			c.quota = p
			break
		}
	}
	freezer := filepath.Join(base, "freezer", "troupe", id)
	c.freeze = exists(filepath.Join(freezer, "freezer.state"))
	c.state = c.freeze
	for _, ctl := range []string{"freezer", "pids", "memory", "cpu,cpuacct", "cpu"} {
		if p := exists(filepath.Join(base, ctl, "troupe", id, "cgroup.procs")); p != "" {
			c.procs = p
			break
		}
	}
	return c
}

// readPids reads a cgroup.procs file; a missing one lists nothing.
func readPids(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil && p > 0 {
			pids = append(pids, p)
		}
	}
	return pids
}
