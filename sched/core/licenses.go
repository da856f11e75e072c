package core

import "github.com/troupe-hpc/troupe/internal/reason"

// The license stage: site-wide counts (Snapshot.Licenses, the seats of a
// licensed solver) that a job holds all of, or none, from its start to
// its end, whichever nodes it runs on. What is free is derived on every
// pass from the snapshot alone: each count less what the running jobs
// hold (Running.Licenses), less what the pass itself starts. There is no
// counter to keep, so none can drift from the jobs that run.
//
//	a job's licenses are not all free now          ──► Licenses (it may
//	   still get a reservation: the earliest time both its nodes and
//	   its licenses are free, given the walltimes of what runs)
//	they are free now, but taking them would leave
//	   a reservation that starts before the job ends
//	   too few                                     ──► as nodes that do
//	   not fit: Priority, or a reservation of its own
//
// A count lowered below what the running jobs hold (a reconfig) leaves
// them running; no job that asks for that license starts until enough
// of them have ended.

// licenses is what is free of each count during one pass; nil when the
// snapshot names no licenses and no job holds any.
type licenses struct {
	free map[string]int
}

func newLicenses(s *Snapshot) *licenses {
	if len(s.Licenses) == 0 && !anyHeld(s.Running) {
		return nil
	}
	l := &licenses{free: make(map[string]int, len(s.Licenses))}
	for name, n := range s.Licenses {
		l.free[name] = n
	}
	for i := range s.Running {
		for name, n := range s.Running[i].Licenses {
			l.free[name] -= n
		}
	}
	return l
}

func anyHeld(rs []Running) bool {
	for i := range rs {
		if len(rs[i].Licenses) > 0 {
			return true
		}
	}
	return false
}

// fits reports whether want is free now. A license the snapshot does
// not count is never free.
func (l *licenses) fits(want map[string]int) bool {
	return covers(l.freeMap(), want)
}

func (l *licenses) freeMap() map[string]int {
	if l == nil {
		return nil
	}
	return l.free
}

// take counts want, started in this pass.
func (l *licenses) take(want map[string]int) {
	if l == nil {
		return
	}
	for name, n := range want {
		l.free[name] -= n
	}
}

// covers reports whether free holds every count of want.
func covers(free, want map[string]int) bool {
	for name, n := range want {
		if n > 0 && free[name] < n {
			return false
		}
	}
	return true
}

// licenseCheck is why j, whose gang would run until end, may not take its
// licenses now: reason.Licenses when they are not free, "delay" when
// taking them would delay a reservation, "" when it may.
func (p *pass) licenseCheck(j *Job, end int64) string {
	if len(j.Licenses) == 0 {
		return ""
	}
	if !p.lic.fits(j.Licenses) {
		return reason.Licenses
	}
	if p.bf != nil && !p.bf.licensesFit(j.Licenses, end) {
		return licenseDelay
	}
	return ""
}

// licenseDelay is licenseCheck's answer for a job whose licenses would
// delay a reservation: it misses as a job whose nodes do not fit.
const licenseDelay = "delay"

// licensesFit reports whether a job holding want until end leaves every
// reservation that starts before end the licenses it needs then.
func (b *backfill) licensesFit(want map[string]int, end int64) bool {
	for ri := range b.resv {
		r := &b.resv[ri]
		if r.start >= end || len(r.lic) == 0 {
			continue
		}
		for name, n := range want {
			if left, ok := r.lic[name]; ok && n > left {
				return false
			}
		}
	}
	return true
}

// licenseProjection is what is free of each license now, with the
// reservations' licenses taken out (they hold them from now until they
// end, as they hold their nodes in the projection).
func (b *backfill) licenseProjection() map[string]int {
	out := map[string]int{}
	for name, n := range b.lic.freeMap() {
		out[name] = n
	}
	for name, n := range b.reservedLic {
		out[name] -= n
	}
	return out
}

// addCounts adds what ev gives back to free.
func addCounts(free, back map[string]int) {
	for name, n := range back {
		free[name] += n
	}
}

// startedLicenses eats the license slack of the reservations that a job
// holding want until end overlaps.
func (b *backfill) startedLicenses(want map[string]int, end int64) {
	for ri := range b.resv {
		r := &b.resv[ri]
		if r.start >= end {
			continue
		}
		for name, n := range want {
			if _, ok := r.lic[name]; ok {
				r.lic[name] -= n
			}
		}
	}
}
