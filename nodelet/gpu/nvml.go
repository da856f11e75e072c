//go:build cgo && linux

package gpu

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func discoverNVML() (devs []Device, err error) {
	defer func() {
		if r := recover(); r != nil { // no libnvidia-ml.so
			devs, err = nil, fmt.Errorf("nvml: %v", r)
		}
	}()
	switch ret := nvml.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		return nil, fmt.Errorf("nvml init: %s: %w", nvml.ErrorString(ret), errNoDriver)
	default:
		return nil, fmt.Errorf("nvml init: %s", nvml.ErrorString(ret))
	}
	defer nvml.Shutdown()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, errors.New("nvml device count: " + nvml.ErrorString(ret))
	}
	for i := range n {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml device %d: %s", i, nvml.ErrorString(ret))
		}
		dev := Device{Index: i}
		dev.UUID, _ = d.GetUUID()
		dev.Name, _ = d.GetName()
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			dev.Memory = int64(m.Total)
		}
		if attr, ret := d.GetAttributes(); ret == nvml.SUCCESS {
			dev.SMs = int(attr.MultiprocessorCount)
		}
		if cur, _, ret := d.GetMigMode(); ret == nvml.SUCCESS {
			dev.MIG = cur == nvml.DEVICE_MIG_ENABLE
		}
		devs = append(devs, dev)
	}
	return devs, nil
}

// Usage reads each device's utilization and memory in use from NVML;
// nil without a driver.
func Usage() (use map[int]Use) {
	defer func() {
		if r := recover(); r != nil {
			use = nil
		}
	}()
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil
	}
	defer nvml.Shutdown()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil
	}
	use = map[int]Use{}
	for i := range n {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		var u Use
		if r, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
			u.Utilization = float64(r.Gpu) / 100
		}
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			u.MemoryUsed = int64(m.Used)
		}
		use[i] = u
	}
	return use
}

// Statuses reads each device's health from NVML: lost (its handle or
// its UUID answers GPU_IS_LOST) and its volatile uncorrectable ECC
// count (0 where ECC is off or not supported). An error: NVML itself
// cannot be reached, which tells nothing of the devices.
func Statuses() (st []Status, err error) {
	defer func() {
		if r := recover(); r != nil {
			st, err = nil, fmt.Errorf("nvml: %v", r)
		}
	}()
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml init: %s", nvml.ErrorString(ret))
	}
	defer nvml.Shutdown()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, errors.New("nvml device count: " + nvml.ErrorString(ret))
	}
	for i := range n {
		s := Status{Index: i}
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret == nvml.SUCCESS {
			_, ret = d.GetUUID()
		}
		switch ret {
		case nvml.SUCCESS:
			if c, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
				s.UncorrectedECC = c
			}
		case nvml.ERROR_GPU_IS_LOST:
			s.Lost = true
		} // another error tells nothing of the device: healthy as far as known
		st = append(st, s)
	}
	return st, nil
}
