package gpu

import (
	"reflect"
	"testing"
)

func TestRound(t *testing.T) {
	tests := []struct {
		name         string
		req, quantum float64
		want         float64
	}{
		{"zero", 0, 0.1, 0},
		{"exact quantum", 0.3, 0.1, 0.3},
		{"rounds up", 0.33, 0.1, 0.4},
		{"no quantum", 0.33, 0, 0.33},
		{"one", 1, 0.25, 1},
		{"whole above one", 2, 0.1, 2},
		{"fraction above one rounds to whole", 1.5, 0.1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Round(tt.req, tt.quantum); got < tt.want-Eps || got > tt.want+Eps {
				t.Fatalf("Round(%g, %g) = %g, want %g", tt.req, tt.quantum, got, tt.want)
			}
		})
	}
}

func TestPick(t *testing.T) {
	tests := []struct {
		name     string
		free     []float64
		reqs     []float64
		wantIdx  [][]int // per request; nil: does not fit
		wantFree []float64
	}{
		{"best fit keeps a whole device whole", []float64{1, 0.5}, []float64{0.5}, [][]int{{1}}, []float64{1, 0}},
		{"free shares in total but none on one device", []float64{0.5, 0.5}, []float64{1}, [][]int{nil}, []float64{0.5, 0.5}},
		{"a 1.0 request after two 0.5s", []float64{1, 1}, []float64{0.5, 0.5, 1}, [][]int{{0}, {0}, {1}}, []float64{0, 0}},
		{"whole devices for a request above one", []float64{1, 0.5, 1, 1}, []float64{2}, [][]int{{0, 2}}, []float64{0, 0.5, 0, 1}},
		{"not enough whole devices", []float64{1, 0.9}, []float64{2}, [][]int{nil}, []float64{1, 0.9}},
		{"ties go to the lowest index", []float64{0.5, 0.5}, []float64{0.2}, [][]int{{0}}, []float64{0.3, 0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			free := append([]float64(nil), tt.free...)
			for k, r := range tt.reqs {
				idx, _, ok := Pick(free, r, 0.1)
				if ok != (tt.wantIdx[k] != nil) || (ok && !reflect.DeepEqual(idx, tt.wantIdx[k])) {
					t.Fatalf("request %d (%g): got %v %v, want %v", k, r, idx, ok, tt.wantIdx[k])
				}
				if Fits(tt.free, r, 0.1) != (k > 0 || ok) && k == 0 {
					t.Fatalf("Fits disagrees with Pick for request %g", r)
				}
			}
			for i := range free {
				if d := free[i] - tt.wantFree[i]; d > Eps || d < -Eps {
					t.Fatalf("free after = %v, want %v", free, tt.wantFree)
				}
			}
		})
	}
}
