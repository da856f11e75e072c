package core

import "github.com/troupe-hpc/troupe/internal/reason"

// Waiting is the reason a job shows from an act that changes it (its
// submission, an array element's row made) until the next pass gives
// it the stages' own verdict: held ──► Held; a dependency ──►
// Dependency (the eligible stage tells, from the jobs it names, whether
// it can still be met); an element of an array already running as many
// as its max_running allows ──► JobArrayTaskLimit; else Priority, as
// the walk gives a job it has not reached. The order is the stages':
// eligible before limits before placement. schedd and bsim spell a
// waiting job's reason through here, so that what the stages decide
// is decided in this package alone.
func Waiting(held, dependent, throttled bool) string {
	switch {
	case held:
		return reason.Held
	case dependent:
		return reason.Dependency
	case throttled:
		return reason.ArrayTaskLimit
	}
	return reason.Priority
}
