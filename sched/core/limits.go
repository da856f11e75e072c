package core

import (
	"maps"

	"github.com/troupe-hpc/troupe/internal/reason"
)

// The limits stage: run on each job in priority order during the walk
// (it counts what the pass itself starts, so it cannot run before the
// order is known). A job past a limit waits, blocks nobody and holds no
// reservation:
//
//	its array runs as many elements as its throttle allows
//	  (Snapshot.ArraySlots)                              ──► JobArrayTaskLimit
//	its user's running jobs in its partition with it would pass
//	  Partition.UserLimits, or its user's running jobs of its QOS
//	  QOS.UserLimits                                     ──► AccountLimit

// limits is the limits stage of one pass.
type limits struct {
	// slots is what is left of Snapshot.ArraySlots in this pass.
	slots map[uint64]int
	// users is what each user holds where per-user limits apply; nil
	// when no partition has any.
	users *userLimits
}

func newLimits(s *Snapshot) limits {
	return limits{slots: maps.Clone(s.ArraySlots), users: newUserLimits(s)}
}

// check is the reason j may not start now because of a limit, "" when
// none keeps it.
func (l *limits) check(j *Job) string {
	if j.Array == 0 && l.users == nil {
		return ""
	}
	if j.Array != 0 {
		if left, limited := l.slots[j.Array]; limited && left <= 0 {
			return reason.ArrayTaskLimit
		}
	}
	if l.users.over(j) {
		return reason.AccountLimit
	}
	return ""
}

// started counts j, placed in this pass, against its limits.
func (l *limits) started(j *Job) {
	if _, limited := l.slots[j.Array]; limited && j.Array != 0 {
		l.slots[j.Array]--
	}
	l.users.started(j)
}

// userPart keys what one user holds in one partition, or (qos set) in
// one QOS.
type userPart struct {
	user, part string
	qos        bool
}

// holding is what one user's jobs hold in one partition.
type holding struct {
	jobs int
	res  Res
}

// userLimits is the per-user limits stage of a pass: what each user
// holds in each partition with per-user limits (Partition.UserLimits),
// from the running jobs and then the pass's placements.
type userLimits struct {
	s    *Snapshot
	held map[userPart]holding
}

// newUserLimits sums what the running jobs hold per user in the
// partitions that have per-user limits; nil when none has.
func newUserLimits(s *Snapshot) *userLimits {
	limited := false
	for _, p := range s.Partitions {
		if p.UserLimits.set() {
			limited = true
			break
		}
	}
	for _, q := range s.QOS {
		limited = limited || q.UserLimits.set()
	}
	if !limited {
		return nil
	}
	u := &userLimits{s: s, held: map[userPart]holding{}}
	for i := range s.Running {
		r := &s.Running[i]
		if s.Partitions[r.Partition].UserLimits.set() {
			u.add(userPart{r.User, r.Partition, false}, r.Containers)
		}
		if r.QOS != "" && s.QOS[r.QOS].UserLimits.set() {
			u.add(userPart{r.User, r.QOS, true}, r.Containers)
		}
	}
	return u
}

// add counts one job of containers cs toward k.
func (u *userLimits) add(k userPart, cs []Res) {
	h := u.held[k]
	h.jobs++
	for _, c := range cs {
		h.res = h.res.Add(c)
	}
	u.held[k] = h
}

// plus is what j's user would hold under k with j started.
func (u *userLimits) plus(j *Job, k userPart) holding {
	h := u.held[k]
	h.jobs++
	for _, c := range j.Containers {
		h.res = h.res.Add(c)
	}
	return h
}

// over reports whether starting j would take its user past its
// partition's per-user limits.
func (u *userLimits) over(j *Job) bool {
	if u == nil {
		return false
	}
	if l := u.s.Partitions[j.Partition].UserLimits; l.set() {
		if h := u.plus(j, userPart{j.User, j.Partition, false}); l.exceeded(h.jobs, h.res) {
			return true
		}
	}
	if j.QOS == "" {
		return false
	}
	l := u.s.QOS[j.QOS].UserLimits
	if !l.set() {
		return false
	}
	h := u.plus(j, userPart{j.User, j.QOS, true})
	return l.exceeded(h.jobs, h.res)
}

// started counts j, placed in this pass, toward its user's holding.
func (u *userLimits) started(j *Job) {
	if u == nil {
		return
	}
	if u.s.Partitions[j.Partition].UserLimits.set() {
		u.add(userPart{j.User, j.Partition, false}, j.Containers)
	}
	if j.QOS != "" && u.s.QOS[j.QOS].UserLimits.set() {
		u.add(userPart{j.User, j.QOS, true}, j.Containers)
	}
}
