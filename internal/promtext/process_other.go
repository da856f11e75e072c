//go:build !linux

package promtext

// WriteProcess writes nothing where there is no /proc.
func WriteProcess(*Writer) {}
