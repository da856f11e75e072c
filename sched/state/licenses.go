package state

import "github.com/troupe-hpc/troupe/internal/lifecycle"

// HoldsLicenses reports whether j holds its licenses now: from its
// placement until it ends (SCHEDULED, PREPARING, RUNNING), and while a
// node runs the containers of a queued job being adopted after a
// restore. A job array's own row holds none: its elements do. The
// licenses in use are always summed from the rows this way, never kept
// in a counter of their own.
//
// Licenses belong to schema 11: a row of an older schema holds none.
// While a peer of the previous release may read the log, the rows are
// written in its form with their licenses beside it, which that release
// ignores: it counts no licenses should it lead, and a snapshot it
// writes keeps none.
func HoldsLicenses(j *Job) bool {
	if len(j.Licenses) == 0 || j.Array != nil || j.State.Terminal() {
		return false
	}
	switch j.State {
	case lifecycle.JobPending, lifecycle.JobHeld:
		return j.Adopting()
	}
	return true
}

// LicenseUse sums the licenses the live jobs hold, by name.
func (v *Snapshot) LicenseUse() map[string]int {
	use := map[string]int{}
	for _, j := range v.LiveJobs() {
		if HoldsLicenses(j) {
			for name, n := range j.Licenses {
				use[name] += n
			}
		}
	}
	return use
}
