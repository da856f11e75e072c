package state

import "github.com/troupe-hpc/troupe/internal/lifecycle"

// LicenseSchema is the first schema whose rows hold licenses: a row of
// an older schema holds none. A peer of the previous release would
// ignore a row's licenses (count none should it lead, keep none in a
// snapshot it writes), so while the cluster's entries are written in an
// older schema for such a peer, schedd takes no job that asks for
// licenses (admission refuses them, and the raft log would not write
// such a submit: Command.NeedsSchema).
const LicenseSchema = 11

// asksLicenses reports whether a job of s asks for licenses.
func (s Submit) asksLicenses() bool {
	for _, j := range s.Jobs {
		if len(j.Licenses) > 0 {
			return true
		}
	}
	return false
}

// HoldsLicenses reports whether j holds its licenses now: from its
// placement until it ends (SCHEDULED, PREPARING, RUNNING), and while a
// node runs the containers of a queued job being adopted after a
// restore. A job array's own row holds none: its elements do. The
// licenses in use are always summed from the rows this way, never kept
// in a counter of their own.
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
