package runc

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

// runShell runs script in a fresh container and returns its output and
// exit code; mod adjusts the spec first.
func runShell(t *testing.T, r *Runtime, init, script string, mod func(*runtime.Spec)) (string, int) {
	t.Helper()
	spec, out := runtimetest.NewSpec(t, init, "sh", "-c", script)
	if mod != nil {
		mod(&spec)
	}
	c := runtimetest.Start(t, r, spec)
	e := runtimetest.WaitExit(t, c, 20*time.Second)
	if err := c.Destroy(context.Background()); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	for _, p := range CgroupPaths(spec.ID) {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("cgroup %s left after destroy", p)
		}
	}
	return runtimetest.ReadFile(t, out), e.Code
}

func TestIsolation(t *testing.T) {
	r := newTestRuntime(t)
	init := runtimetest.BuildInit(t)
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n10.1.2.3 main1\n10.1.2.4 sub1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		script string
		mod    func(*runtime.Spec)
		want   string
	}{
		{"Hostname", "hostname", func(s *runtime.Spec) { s.Hostname = "sub7" }, "sub7"},
		{"UIDGID", "echo $(id -u):$(id -g)", func(s *runtime.Spec) { s.UID, s.GID = 1234, 2345 }, "1234:2345"},
		{"MemoryLimit",
			"cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max",
			func(s *runtime.Spec) { s.Memory = 256 << 20 }, strconv.Itoa(256 << 20)},
		{"CPUQuota",
			"cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cut -d' ' -f1 /sys/fs/cgroup/cpu.max",
			func(s *runtime.Spec) { s.CPUMilli = 1500 }, "150000"},
		// 4 millicores is 400 µs a period, below the kernel's 1000 µs
		// minimum: the container gets the minimum and starts.
		{"CPUQuotaFloor",
			"cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cut -d' ' -f1 /sys/fs/cgroup/cpu.max",
			func(s *runtime.Spec) { s.CPUMilli = 4 }, "1000"},
		{"PidsLimit", "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max", nil, "4096"},
		{"PidsLimitSet", "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max", func(s *runtime.Spec) { s.Pids = 64 }, "64"},
		{"EtcHostsBind", "cat /etc/hosts",
			func(s *runtime.Spec) {
				s.Mounts = append(s.Mounts, runtime.Mount{Source: hosts, Target: "/etc/hosts", ReadOnly: true})
			}, "127.0.0.1 localhost\n10.1.2.3 main1\n10.1.2.4 sub1"},
		{"HostImageReadOnly", "touch /usr/troupe-probe 2>/dev/null && echo writable || echo readonly",
			nil, "readonly"},
		{"HostImageReadOnlyAsRoot", "touch /usr/troupe-probe 2>/dev/null && echo writable || echo readonly",
			func(s *runtime.Spec) { s.UID, s.GID = 0, 0 }, "readonly"},
		{"TmpAndHomeWritable",
			"echo a > /tmp/x && echo b > /home/work/y && cat /tmp/x /home/work/y | tr -d '\\n'",
			func(s *runtime.Spec) { s.UID, s.GID = 1234, 2345 }, "ab"},
		{"PidNamespaceInitIsPID1", "tr '\\0' ' ' < /proc/1/cmdline", nil,
			runtime.InitPath + " --exit-fd 3 run -- sh -c tr '\\0' ' ' < /proc/1/cmdline"},
		{"NoCapsForUsers", "grep CapEff /proc/self/status | tr -d '\\t'",
			func(s *runtime.Spec) { s.UID = 1234 }, "CapEff:0000000000000000"},
		{"DeviceNode", "test -c /dev/kmsg && echo device || echo missing",
			func(s *runtime.Spec) {
				if d, err := runtime.DeviceAt("/dev/kmsg"); err == nil {
					s.Devices = append(s.Devices, d)
				}
			}, "device"},
		{"MergedUsrSymlink", "readlink /bin", nil, mustReadlink("/bin")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, code := runShell(t, r, init, tc.script, tc.mod)
			if got != tc.want || code != 0 {
				t.Errorf("got %q (exit %d), want %q", got, code, tc.want)
			}
		})
	}
}

func mustReadlink(p string) string {
	s, err := os.Readlink(p)
	if err != nil {
		return "(not a symlink)"
	}
	return s
}

func TestRootfsImage(t *testing.T) {
	r := newTestRuntime(t)
	init := runtimetest.BuildInit(t)
	// An empty directory is a valid rootfs: the static troupe-init,
	// mounted in, is the only program, so it runs itself with bad usage.
	root := t.TempDir()
	spec, _ := runtimetest.NewSpec(t, init, runtime.InitPath, "run", "--", runtime.InitPath, "bogus")
	spec.Image = root
	c := runtimetest.Start(t, r, spec)
	if e := runtimetest.WaitExit(t, c, 10*time.Second); e.Code != 2 {
		t.Errorf("exit = %+v, want 2 (troupe-init usage)", e)
	}
}

func TestCleanupRemovesLeftovers(t *testing.T) {
	r := newTestRuntime(t)
	init := runtimetest.BuildInit(t)
	spec, _ := runtimetest.NewSpec(t, init, "sleep", "60")
	if _, err := r.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	// A new nodelet process: same state dir, no Container handle.
	r2 := &Runtime{binary: r.binary, root: r.root, lib: r.lib, mnt: r.mnt, images: r.images}
	if err := r2.Cleanup(context.Background()); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if ids, err := r.list(context.Background()); err != nil || len(ids) != 0 {
		t.Errorf("%s still lists %q (%v)", r.OCI(), ids, err)
	}
	if !eventually.Within(5*time.Second, func() bool { return len(runtimetest.FindProcs(spec.ID)) == 0 }) {
		t.Errorf("processes left: %v", runtimetest.FindProcs(spec.ID))
	}
}

// TestOOMKillReported: a command past its memory limit is killed by the
// kernel, and the exit says so.
func TestOOMKillReported(t *testing.T) {
	r := newTestRuntime(t)
	init := runtimetest.BuildInit(t)
	spec, out := runtimetest.NewSpec(t, init, "sh", "-c", "echo start; x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived")
	spec.Memory = 32 << 20
	c := runtimetest.Start(t, r, spec)
	e := runtimetest.WaitExit(t, c, 30*time.Second)
	if !e.OOM || e.Code == 0 {
		t.Errorf("exit = %+v, want OOM with a non-zero code; output %q", e, runtimetest.ReadFile(t, out))
	}
	spec2, _ := runtimetest.NewSpec(t, init, "sh", "-c", "exit 3")
	spec2.Memory = 32 << 20
	if e := runtimetest.WaitExit(t, runtimetest.Start(t, r, spec2), 10*time.Second); e.OOM || e.Code != 3 {
		t.Errorf("plain exit = %+v, want code 3 and no OOM", e)
	}
}
