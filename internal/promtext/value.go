package promtext

import (
	"math"
	"sync/atomic"
)

// Counter counts up from zero; it is safe for concurrent use. Its zero
// value is ready.
type Counter struct{ n atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.n.Add(n) }

// Value is the count.
func (c *Counter) Value() float64 { return float64(c.n.Load()) }

// Gauge is a value that goes up and down; it is safe for concurrent use.
// Its zero value is ready and reads 0.
type Gauge struct{ bits atomic.Uint64 }

// Set sets the value to v.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Add adds d (negative to subtract).
func (g *Gauge) Add(d float64) {
	for {
		old := g.bits.Load()
		if g.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Inc adds one.
func (g *Gauge) Inc() { g.Add(1) }

// Dec subtracts one.
func (g *Gauge) Dec() { g.Add(-1) }

// Value is the value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }
