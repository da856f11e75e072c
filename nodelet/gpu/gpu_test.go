package gpu

import (
	"errors"
	"log/slog"
	"os"
	"slices"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// TestDiscoverNoDriverIsZero: a node without the NVIDIA driver has no
// GPU and that is no failure; a node with it has its GPUs found. Either
// way the test runs: it never skips on the machine it was meant for.
func TestDiscoverNoDriverIsZero(t *testing.T) {
	devs, err := discover(0)
	if driver := nvidiaDriverLoaded(); driver != "" {
		// A node with the driver: discovery must find its GPUs.
		if err != nil || len(devs) == 0 {
			t.Fatalf("the NVIDIA driver is loaded (%s) but discovery found %d GPUs: %v", driver, len(devs), err)
		}
		for _, d := range devs {
			if d.UUID == "" || d.Memory <= 0 {
				t.Errorf("GPU %d discovered without its UUID or memory: %+v", d.Index, d)
			}
		}
		return
	}
	if len(devs) != 0 || (err != nil && !errors.Is(err, errNoDriver)) {
		t.Fatalf("a node without the NVIDIA driver: %d GPUs, %v; want none and no failure", len(devs), err)
	}
	if got := Discover(0, slog.Default()); len(got) != 0 {
		t.Fatalf("Discover on a node without the driver: %d GPUs", len(got))
	}
}

// nvidiaDriverLoaded names the trace the NVIDIA kernel driver leaves on
// a node where it is loaded, "" when there is none; it asks the kernel,
// not NVML, so that it does not share discovery's faults.
func nvidiaDriverLoaded() string {
	for _, p := range []string{"/proc/driver/nvidia/version", "/dev/nvidiactl"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func TestEnv(t *testing.T) {
	devs := Discover(2, slog.Default())
	tests := []struct {
		name   string
		shares []api.GPUShare
		want   []string
	}{
		{"None", nil, []string{"NVIDIA_VISIBLE_DEVICES=void", "CUDA_VISIBLE_DEVICES="}},
		{"Whole", []api.GPUShare{{Device: 0, Share: 1}, {Device: 1, Share: 1}},
			[]string{"NVIDIA_VISIBLE_DEVICES=GPU-fake-0000,GPU-fake-0001", "CUDA_VISIBLE_DEVICES=0,1"}},
		{"Fraction", []api.GPUShare{{Device: 1, Share: 0.25}},
			[]string{"NVIDIA_VISIBLE_DEVICES=GPU-fake-0001", "CUDA_VISIBLE_DEVICES=1",
				"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M",
				"CUDA_MPS_PIPE_DIRECTORY=/run/mps"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Env(devs, tc.shares, "/run/mps", false); !slices.Equal(got, tc.want) {
				t.Errorf("Env = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEnvRemapped (issue 14 item 6g): in a container that holds only its
// own device nodes, CUDA numbers them from 0; CUDA_VISIBLE_DEVICES names
// those ordinals, not the node's indexes (3 and 1 would hide both).
func TestEnvRemapped(t *testing.T) {
	devs := Discover(4, slog.Default())
	got := Env(devs, []api.GPUShare{{Device: 3, Share: 1}, {Device: 1, Share: 1}}, "", true)
	want := []string{"NVIDIA_VISIBLE_DEVICES=GPU-fake-0003,GPU-fake-0001", "CUDA_VISIBLE_DEVICES=0,1"}
	if !slices.Equal(got, want) {
		t.Errorf("Env = %q, want %q", got, want)
	}
	got = Env(devs, []api.GPUShare{{Device: 2, Share: 0.5}}, "/run/mps", true)
	want = []string{"NVIDIA_VISIBLE_DEVICES=GPU-fake-0002", "CUDA_VISIBLE_DEVICES=0",
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M", "CUDA_MPS_PIPE_DIRECTORY=/run/mps"}
	if !slices.Equal(got, want) {
		t.Errorf("fraction: Env = %q, want %q", got, want)
	}
}
