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
	none := ociSpec(base, layout{dir: "/d"}, "/r", nil, false)
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
	sp := ociSpec(withGPU, layout{dir: "/d"}, "/r", nil, false)
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

// TestSpecLayeredMounts: over an image with the Spec's layer, the
// mounts the layer holds (and troupe-init, with InitLayered) are left
// out and the others kept; without the layer (the host image), every
// one is bind-mounted as before.
func TestSpecLayeredMounts(t *testing.T) {
	s := runtime.Spec{ID: "x", Dir: "/d", Init: "/i", InitLayered: true, Args: []string{"true"}, Layer: "/f/layer",
		Mounts: []runtime.Mount{
			{Source: "/f/layer/etc/hosts", Target: "/etc/hosts", ReadOnly: true, Layered: true},
			{Source: "/data", Target: "/data"},
		}}
	targets := func(layered bool) map[string]bool {
		out := map[string]bool{}
		for _, m := range ociSpec(s, layout{dir: "/d"}, "/r", nil, layered).Mounts {
			out[m.Destination] = true
		}
		return out
	}
	if got := targets(true); got["/etc/hosts"] || got[runtime.InitPath] || !got["/data"] || !got[runtime.HomeDir] {
		t.Errorf("over the layer: mounts at %v, want /data and the home, not /etc/hosts or troupe-init", got)
	}
	if got := targets(false); !got["/etc/hosts"] || !got[runtime.InitPath] || !got["/data"] {
		t.Errorf("without the layer: mounts at %v, want /etc/hosts, troupe-init and /data", got)
	}
}

// TestLayerFits: a layer lies over an image whose /etc is a directory or
// missing, not over one whose /etc is a symbolic link (the layer's etc/
// would hide the image's whole).
func TestLayerFits(t *testing.T) {
	dir, nothing, link := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/etc", filepath.Join(link, "etc")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, lower string
		want        bool
	}{{"/etc a directory", dir, true}, {"no /etc", nothing, true}, {"/etc a symbolic link", link, false}} {
		if got := layerFits(c.lower); got != c.want {
			t.Errorf("%s: layerFits = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCPUQuota: a container's CFS quota is its millicores × 100 µs per
// 100 ms period, never below the kernel's minimum of 1000 µs.
func TestCPUQuota(t *testing.T) {
	for _, c := range []struct{ milli, want int64 }{
		{1000, 100000}, {1500, 150000}, {250, 25000}, {10, 1000}, {4, 1000}, {1, 1000}, {64000, 6400000},
	} {
		if got := CPUQuota(c.milli); got != c.want {
			t.Errorf("CPUQuota(%d) = %d, want %d", c.milli, got, c.want)
		}
	}
	r := resources(runtime.Spec{CPUMilli: 4})
	if r.CPU == nil || *r.CPU.Quota != 1000 || *r.CPU.Period != 100000 {
		t.Fatalf("resources of 4 millicores: %+v, want quota 1000 per period 100000", r.CPU)
	}
	if r := resources(runtime.Spec{}); r.CPU != nil {
		t.Errorf("resources of no cpu limit: %+v, want none", r.CPU)
	}
}
