//go:build !cgo || !linux

package gpu

import (
	"errors"
	"fmt"
)

// discoverNVML: a build without cgo cannot load NVML, so it knows of no
// driver; fake_gpus still gives it devices for tests.
func discoverNVML() ([]Device, error) {
	return nil, fmt.Errorf("built without cgo, NVML cannot be loaded: %w", errNoDriver)
}

// Usage is nil without NVML.
func Usage() map[int]Use { return nil }

// Statuses is an error without NVML.
func Statuses() ([]Status, error) { return nil, errors.New("built without cgo: NVML unavailable") }
