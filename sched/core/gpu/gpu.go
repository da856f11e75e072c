// Package gpu chooses GPU devices for fractional requests: the fGPU stage
// of placement. It is pure and knows nothing of nodes or jobs: it sees the
// free shares of one node's devices.
//
// Rules:
//   - a request ≤ 1 is rounded up to the quantum and comes from one device;
//   - a request > 1 must be whole and takes that many entirely free devices;
//   - among devices that can serve a request ≤ 1, the one left with the
//     least free share wins (best fit), ties to the lowest index, so that
//     whole devices stay whole for whole requests.
//
// Pure like sched/core: the standard library only.
package gpu

import "math"

// Eps absorbs float rounding in shares.
const Eps = 1e-9

// Round is the share a request really takes: requests ≤ 1 round up to a
// multiple of quantum (none when quantum ≤ 0); larger ones to whole
// devices.
func Round(req, quantum float64) float64 {
	switch {
	case req <= Eps:
		return 0
	case req > 1+Eps:
		return math.Ceil(req - Eps)
	case quantum <= 0:
		return req
	}
	n := math.Ceil(req/quantum - Eps)
	return math.Min(1, n*quantum)
}

// Pick chooses devices for one request from free (free share per device,
// by index) and takes them from free. It returns the chosen indexes and
// shares, or false with free untouched.
func Pick(free []float64, req, quantum float64) (idx []int, share []float64, ok bool) {
	r := Round(req, quantum)
	if r == 0 {
		return nil, nil, true
	}
	if r <= 1 {
		best := -1
		for i, f := range free {
			if f+Eps >= r && (best < 0 || f < free[best]-Eps) {
				best = i
			}
		}
		if best < 0 {
			return nil, nil, false
		}
		free[best] = clamp(free[best] - r)
		return []int{best}, []float64{r}, true
	}
	n := int(r)
	for i, f := range free {
		if f >= 1-Eps {
			idx = append(idx, i)
			if len(idx) == n {
				break
			}
		}
	}
	if len(idx) < n {
		return nil, nil, false
	}
	share = make([]float64, n)
	for k, i := range idx {
		free[i] = 0
		share[k] = 1
	}
	return idx, share, true
}

// Fits reports whether Pick would succeed, without taking anything.
func Fits(free []float64, req, quantum float64) bool {
	r := Round(req, quantum)
	if r == 0 {
		return true
	}
	if r <= 1 {
		for _, f := range free {
			if f+Eps >= r {
				return true
			}
		}
		return false
	}
	n := 0
	for _, f := range free {
		if f >= 1-Eps {
			n++
		}
	}
	return n >= int(r)
}

func clamp(f float64) float64 {
	if f < Eps {
		return 0
	}
	return f
}
