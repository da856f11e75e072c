package units

import "math"

// MinCPUMilli is the least cpu, in millicores, a container may be given
// (cpu 0.01). A container's cpu is enforced as a CFS quota of 100 µs per
// millicore in each 100 ms period, and the kernel refuses a quota under
// 1 ms (1000 µs): below 10 millicores no limit can be set, so submission
// refuses such a cpu rather than let the container fail at start.
const MinCPUMilli = 10

// MilliCPU is cores (a job file's cpu, a partition's max_cpu, a bsim
// flag: fractional) in whole millicores, rounded to the nearest (half
// up); 0 for cores <= 0, NaN included, and at most math.MaxInt64. It is the one conversion: the
// scheduler, its limits, the replay and the node all count cpu in its
// result, decided once when a job or a config is read.
func MilliCPU(cores float64) int64 {
	if !(cores > 0) {
		return 0
	}
	m := math.Round(cores * 1000)
	if m >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(m)
}
