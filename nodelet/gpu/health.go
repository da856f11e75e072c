package gpu

import "fmt"

// Status is what the driver says of one device's health.
type Status struct {
	Index int // node-local index, as Device.Index
	// Lost: the driver lost the device (NVML's GPU_IS_LOST, "fallen off
	// the bus"); nothing runs on it until the node is reset.
	Lost bool
	// UncorrectedECC counts the device's uncorrectable ECC errors since
	// the driver loaded (volatile): any is a failed memory row that
	// corrupts what runs there until the device is reset.
	UncorrectedECC uint64
}

// Problem describes the first failing device of devs by what st says,
// "" when every device is healthy. A device the driver no longer lists
// at all is lost.
func Problem(devs []Device, st []Status) string {
	byIndex := map[int]Status{}
	for _, s := range st {
		byIndex[s.Index] = s
	}
	for _, d := range devs {
		s, ok := byIndex[d.Index]
		switch {
		case !ok || s.Lost:
			return fmt.Sprintf("GPU %d (%s) is lost: the driver no longer reaches it", d.Index, d.UUID)
		case s.UncorrectedECC > 0:
			return fmt.Sprintf("GPU %d (%s) has %d uncorrectable ECC errors", d.Index, d.UUID, s.UncorrectedECC)
		}
	}
	return ""
}
