package sim

import (
	"fmt"

	"github.com/troupe-hpc/troupe/sched/core"
)

// Policies are the names bsim takes.
var Policies = []string{"fcfs", "easy", "default"}

// ErrPolicy marks an unknown policy name.
var ErrPolicy = fmt.Errorf("unknown policy; known: fcfs, easy, default")

// Policy returns the core policy for a name and whether it needs fair
// share: fcfs is strict FIFO, easy is FIFO order with EASY backfill
// (depth 1), default is core.DefaultPolicy with fair share.
func Policy(name string) (core.Policy, bool, error) {
	switch name {
	case "fcfs":
		return core.Policy{}, false, nil
	case "easy":
		return core.Policy{ReservationDepth: 1}, false, nil
	case "default", "":
		return core.DefaultPolicy(), true, nil
	}
	return core.Policy{}, false, fmt.Errorf("%q: %w", name, ErrPolicy)
}
