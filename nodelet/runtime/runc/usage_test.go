package runc

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// TestReadUsage reads both cgroup layouts from fake hierarchies.
func TestReadUsage(t *testing.T) {
	write := func(base, rel, content string) {
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v1 := t.TempDir()
	write(v1, "cpu,cpuacct/troupe/c1/cpuacct.usage", "1500000000\n")
	write(v1, "memory/troupe/c1/memory.max_usage_in_bytes", "73400320\n")
	v2 := t.TempDir()
	write(v2, "troupe/c1/cpu.stat", "usage_usec 2250000\nuser_usec 2000000\nsystem_usec 250000\n")
	write(v2, "troupe/c1/memory.peak", "1048576\n")
	for _, tc := range []struct {
		name, base string
		want       runtime.Usage
	}{
		{"v1", v1, runtime.Usage{CPU: 1500 * time.Millisecond, MemPeak: 70 << 20}},
		{"v2", v2, runtime.Usage{CPU: 2250 * time.Millisecond, MemPeak: 1 << 20}},
		{"none", t.TempDir(), runtime.Usage{}},
	} {
		if got := readUsage(tc.base, "c1"); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
