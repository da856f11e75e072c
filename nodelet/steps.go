package nodelet

import (
	"log/slog"
	"time"
)

// stepClock times the steps of a container's start, for the debug log
// ("container started": how long each step took), so that where a
// slot's preparing goes can be read off a nodelet run with -v.
type stepClock struct {
	last  time.Time
	attrs []any
}

func newStepClock() *stepClock { return &stepClock{last: time.Now()} }

// mark ends the step named name, started at the previous mark.
func (c *stepClock) mark(name string) {
	if c == nil {
		return
	}
	now := time.Now()
	c.attrs = append(c.attrs, slog.Duration(name, now.Sub(c.last)))
	c.last = now
}

// group is the steps as one log attribute.
func (c *stepClock) group() slog.Attr { return slog.Group("steps", c.attrs...) }
