// Package gpu finds the node's NVIDIA GPUs (go-nvml; a node without the
// driver has none, which is not an error) and turns a container's
// allocated shares into what enforces them: the visible-devices
// variables, the device nodes, and NVIDIA MPS limits for fractions.
//
// Of troupe it imports internal/api only; it must not import the agent
// (package nodelet) or sched/....
package gpu

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
)

// Device is one GPU of the node.
type Device struct {
	Index  int    // node-local index, the CUDA ordinal
	UUID   string // GPU-… (MIG-… for a MIG instance)
	Name   string
	Memory int64 // bytes
	SMs    int   // streaming multiprocessors; 0 unknown
	MIG    bool  // MIG mode enabled on the device
}

// Discover returns the node's GPUs: fake ones when fake > 0, else what
// NVML reports; none when there is no driver (logged, not an error), and
// none, with a warning, when a driver is there but discovery fails.
func Discover(fake int, log *slog.Logger) []Device {
	devs, err := discover(fake)
	switch {
	case errors.Is(err, errNoDriver):
		log.Info("no GPUs", "why", err)
	case err != nil:
		log.Warn("GPU discovery failed: the node offers no GPU", "err", err)
	}
	return devs
}

// errNoDriver is a node without the NVIDIA driver (or its library):
// it has no GPU, which is not a failure.
var errNoDriver = errors.New("no NVIDIA driver")

// discover is Discover's answer and why it found none: errNoDriver
// when the node has no driver, another error when discovery failed.
func discover(fake int) ([]Device, error) {
	if fake > 0 {
		devs := make([]Device, fake)
		for i := range devs {
			devs[i] = Device{Index: i, UUID: fmt.Sprintf("GPU-fake-%04d", i), Name: "Fake GPU", Memory: 16 << 30, SMs: 80}
		}
		return devs, nil
	}
	devs, err := discoverNVML()
	if err != nil {
		return nil, err
	}
	return devs, nil
}

// Env is what a container holding shares of devs gets: NVIDIA_VISIBLE_DEVICES
// (the devices' UUIDs, for the NVIDIA container toolkit and apptainer
// --nv), CUDA_VISIBLE_DEVICES and, for a fraction of a device, the MPS
// limits: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (share of the SMs) and
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (share of the memory, per visible
// ordinal). No shares: NVIDIA_VISIBLE_DEVICES=void.
//
// CUDA_VISIBLE_DEVICES holds ordinals as CUDA counts them where the
// process runs. remapped: the container holds only its own device nodes
// (runc, as the NVIDIA container toolkit does), so CUDA numbers them from
// 0 in the order given and node index 3 is ordinal 0 there; otherwise
// (the process runtime, apptainer --nv, which bind every device node of
// the node) the ordinals are the node's indexes.
func Env(devs []Device, shares []api.GPUShare, mpsPipe string, remapped bool) []string {
	if len(shares) == 0 {
		return []string{"NVIDIA_VISIBLE_DEVICES=void", "CUDA_VISIBLE_DEVICES="}
	}
	var uuids, idx, mem []string
	minShare := 1.0
	for i, s := range shares {
		ordinal := s.Device
		if remapped {
			ordinal = i
		}
		idx = append(idx, strconv.Itoa(ordinal))
		uuid := strconv.Itoa(s.Device)
		if s.Device >= 0 && s.Device < len(devs) {
			uuid = devs[s.Device].UUID
			if s.Share < 1 {
				mem = append(mem, fmt.Sprintf("%d=%dM", i, int64(float64(devs[s.Device].Memory)*s.Share)>>20))
			}
		}
		uuids = append(uuids, uuid)
		minShare = min(minShare, s.Share)
	}
	env := []string{
		"NVIDIA_VISIBLE_DEVICES=" + strings.Join(uuids, ","),
		"CUDA_VISIBLE_DEVICES=" + strings.Join(idx, ","),
	}
	if minShare < 1 {
		env = append(env, fmt.Sprintf("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d", max(1, int(minShare*100+0.5))))
		if len(mem) > 0 {
			env = append(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="+strings.Join(mem, ","))
		}
		if mpsPipe != "" {
			env = append(env, "CUDA_MPS_PIPE_DIRECTORY="+mpsPipe)
		}
	}
	return env
}

// DeviceNodes lists the host device files a container holding shares
// needs, those that exist: /dev/nvidiaN per device, and the control and
// UVM nodes.
func DeviceNodes(shares []api.GPUShare) []string {
	if len(shares) == 0 {
		return nil
	}
	cands := []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}
	for _, s := range shares {
		cands = append(cands, fmt.Sprintf("/dev/nvidia%d", s.Device))
	}
	var out []string
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// MPS is the node's MPS control daemon, run while fractional shares are
// in use, where nvidia-cuda-mps-control exists.
type MPS struct {
	Pipe string // CUDA_MPS_PIPE_DIRECTORY; "" when MPS is unavailable
	log  string
}

// StartMPS starts nvidia-cuda-mps-control -d with its pipe and log
// directories under dir; without the binary it returns a zero MPS.
func StartMPS(dir string) (MPS, error) {
	bin, err := exec.LookPath("nvidia-cuda-mps-control")
	if err != nil {
		return MPS{}, nil
	}
	m := MPS{Pipe: filepath.Join(dir, "pipe"), log: filepath.Join(dir, "log")}
	for _, d := range []string{m.Pipe, m.log} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return MPS{}, err
		}
	}
	cmd := exec.Command(bin, "-d")
	cmd.Env = append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+m.Pipe, "CUDA_MPS_LOG_DIRECTORY="+m.log)
	if out, err := cmd.CombinedOutput(); err != nil {
		return MPS{}, fmt.Errorf("nvidia-cuda-mps-control -d: %w: %s", err, out)
	}
	return m, nil
}

// Stop asks the daemon to quit.
func (m MPS) Stop() error {
	if m.Pipe == "" {
		return nil
	}
	cmd := exec.Command("nvidia-cuda-mps-control")
	cmd.Env = append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+m.Pipe)
	cmd.Stdin = strings.NewReader("quit\n")
	return cmd.Run()
}

// Use is what NVML says of a device's use right now.
type Use struct {
	Utilization float64 // 0..1, of the last sample period
	MemoryUsed  int64   // bytes
}
