package units

import (
	"math"
	"testing"
)

func TestMilliCPU(t *testing.T) {
	for _, tt := range []struct {
		cores float64
		want  int64
	}{
		{1, 1000}, {0.5, 500}, {0.01, 10}, {0.0004, 0}, {0.0005, 1}, {0.0096, 10},
		{1.0005, 1001}, {2.9999, 3000}, {65536, 65536000},
		{0, 0}, {-1, 0}, {math.NaN(), 0}, {math.Inf(1), math.MaxInt64}, {1e300, math.MaxInt64},
	} {
		if got := MilliCPU(tt.cores); got != tt.want {
			t.Errorf("MilliCPU(%g) = %d, want %d", tt.cores, got, tt.want)
		}
	}
}
