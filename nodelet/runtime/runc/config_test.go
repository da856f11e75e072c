package runc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// TestSpecGPUDevices: allocated GPUs' device nodes become linux.devices
// and device cgroup allow rules after the deny-all; no GPU, no entries.
func TestSpecGPUDevices(t *testing.T) {
	base := runtime.Spec{ID: "x", Dir: "/d", Init: "/i", Args: []string{"true"}}
	none := ociSpec(base, layout{dir: "/d"}, "/r", nil)
	if len(none.Linux.Devices) != 0 {
		t.Errorf("no GPU: linux.devices = %+v", none.Linux.Devices)
	}
	if rs := none.Linux.Resources.Devices; len(rs) != 1 || rs[0].Allow || rs[0].Access != "rwm" {
		t.Errorf("no GPU: resources.devices = %+v, want deny-all only", rs)
	}

	withGPU := base
	withGPU.Devices = []runtime.Device{
		{Path: "/dev/nvidia1", Type: "c", Major: 195, Minor: 1, Mode: 0o666},
		{Path: "/dev/nvidiactl", Type: "c", Major: 195, Minor: 255, Mode: 0o666},
		{Path: "/dev/nvidia-uvm", Type: "c", Major: 509, Minor: 0, Mode: 0o666},
	}
	sp := ociSpec(withGPU, layout{dir: "/d"}, "/r", nil)
	if len(sp.Linux.Devices) != 3 {
		t.Fatalf("linux.devices = %+v, want 3", sp.Linux.Devices)
	}
	for i, d := range sp.Linux.Devices {
		w := withGPU.Devices[i]
		if d.Path != w.Path || d.Type != "c" || d.Major != w.Major || d.Minor != w.Minor || d.FileMode == nil || *d.FileMode != 0o666 {
			t.Errorf("linux.devices[%d] = %+v, want %+v", i, d, w)
		}
	}
	rs := sp.Linux.Resources.Devices
	if len(rs) != 4 || rs[0].Allow {
		t.Fatalf("resources.devices = %+v, want deny-all then 3 allows", rs)
	}
	for i, r := range rs[1:] {
		w := withGPU.Devices[i]
		if !r.Allow || r.Type != "c" || r.Major == nil || *r.Major != w.Major || r.Minor == nil || *r.Minor != w.Minor || r.Access != "rwm" {
			t.Errorf("resources.devices[%d] = %+v, want allow c %d:%d rwm", i+1, r, w.Major, w.Minor)
		}
	}
}

// TestDeviceAt reads a device node's numbers: /dev/null (1:3) always
// exists; a regular file is refused.
func TestDeviceAt(t *testing.T) {
	d, err := runtime.DeviceAt("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	if d.Type != "c" || d.Major != 1 || d.Minor != 3 {
		t.Errorf("/dev/null = %+v, want c 1:3", d)
	}
	f := filepath.Join(t.TempDir(), "f")
	_ = os.WriteFile(f, nil, 0o644)
	if _, err := runtime.DeviceAt(f); err == nil {
		t.Error("a regular file was taken for a device")
	}
}
