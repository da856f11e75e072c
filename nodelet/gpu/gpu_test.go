package gpu

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

func TestDiscoverNoDriverIsZero(t *testing.T) {
	if devs := Discover(0, slog.Default()); len(devs) != 0 {
		t.Skipf("SKIP: this machine has %d real GPUs", len(devs))
	}
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
