package runc

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestKillAllLeavesEmptyCgroup: killAll of a container whose cgroup
// holds no task any more, the usual end, neither lifts its CPU quota nor
// freezes it (a cgroup v1 freeze patches the kernel's code on every
// CPU) nor writes cgroup.kill: every control file is as it was. Fake
// cgroup trees of both layouts, no root needed.
func TestKillAllLeavesEmptyCgroup(t *testing.T) {
	write := func(t *testing.T, path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		files map[string]string
	}{
		{"v1", map[string]string{
			"freezer/troupe/c1/freezer.state":        "THAWED\n",
			"freezer/troupe/c1/cgroup.procs":         "",
			"cpu,cpuacct/troupe/c1/cpu.cfs_quota_us": "50000\n",
		}},
		{"v2", map[string]string{
			"cgroup.controllers":      "cpu memory pids\n",
			"troupe/c1/cgroup.procs":  "",
			"troupe/c1/cpu.max":       "50000 100000\n",
			"troupe/c1/cgroup.freeze": "0\n",
			"troupe/c1/cgroup.events": "populated 0\nfrozen 0\n",
			"troupe/c1/cgroup.kill":   "",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			for p, content := range c.files {
				write(t, filepath.Join(base, p), content)
			}
			if err := killAll(context.Background(), base, "c1"); err != nil {
				t.Fatal(err)
			}
			for p, want := range c.files {
				got, err := os.ReadFile(filepath.Join(base, p))
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != want {
					t.Errorf("%s: %q after killAll of an empty cgroup, want %q as it was", p, got, want)
				}
			}
		})
	}
}
