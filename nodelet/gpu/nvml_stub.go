//go:build !cgo || !linux

package gpu

import "errors"

func discoverNVML() ([]Device, error) {
	return nil, errors.New("built without cgo: NVML discovery unavailable (set fake_gpus for tests)")
}

// Usage is nil without NVML.
func Usage() map[int]Use { return nil }

// Statuses is an error without NVML.
func Statuses() ([]Status, error) { return nil, errors.New("built without cgo: NVML unavailable") }
