// Package backoff is how troupe waits: Sleep, a wait that a context
// cuts short, and Exp, the capped exponential backoff of the loops that
// retry a call until schedd answers (the nodelet's register, reports and
// assignment polls, troupe-nodesim's).
//
// It imports no troupe package.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits d, or until ctx ends if that is sooner; then it returns
// ctx.Err(), nil when d passed first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Exp is a capped exponential backoff: the first wait is Min, each next
// one twice the last, never more than Max; Reset starts over at Min.
// With Jitter in (0, 1] each wait is drawn at random from
// [w·(1−Jitter), w], so that many clients that failed together do not
// retry together; 0 waits exactly w. The zero Exp does not wait: set
// Min and Max (New does).
type Exp struct {
	Min, Max time.Duration
	Jitter   float64

	cur time.Duration // the next wait before jitter; 0: Min
}

// New returns a backoff from lo to hi without jitter.
func New(lo, hi time.Duration) *Exp { return &Exp{Min: lo, Max: hi} }

// Next returns the wait to make now and doubles the one after (up to
// Max).
func (b *Exp) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.Min
	}
	d := b.cur
	b.cur = min(2*b.cur, b.Max)
	if j := min(b.Jitter, 1); j > 0 {
		d -= time.Duration(rand.Float64() * j * float64(d))
	}
	return d
}

// Reset makes the next wait Min again (after a call that succeeded).
func (b *Exp) Reset() { b.cur = 0 }

// Wait sleeps the next wait (Next), or until ctx ends: ctx.Err() then.
func (b *Exp) Wait(ctx context.Context) error { return Sleep(ctx, b.Next()) }
