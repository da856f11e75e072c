// Package connlimit keeps a daemon's users from taking the open files
// its own traffic needs. Streams caps the long-lived streams users open
// (a job's terminal, connections to its services) per job, per user and
// in all; Guard counts a listener's connections and keeps a reserve of
// descriptors for the nodes' requests (heartbeats, leases, reports,
// assignment long-polls): past the reserve's edge other requests are
// refused, and idle connections that carry no node traffic are closed to
// make room for new ones.
package connlimit

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
)

// ErrTooMany marks a stream refused because a cap is reached: it may
// succeed once other streams end (HTTP 429).
var ErrTooMany = errors.New("too many streams")

// Default caps on streams (Streams.PerJob, Streams.PerUser).
const (
	DefaultPerJob  = 32
	DefaultPerUser = 200
)

// Cap is a cap as the daemons' settings give it: 0 the default def, a
// negative one none (Streams' 0).
func Cap(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}

// StreamCost is the open files one stream costs a daemon, with a
// margin: it holds two (schedd's: the caller's connection and the
// nodelet's; a nodelet's: its connection to schedd and the terminal's
// socket or the service's port), and as many again are left for the
// daemon's other connections. A derived cap on all streams divides the
// open files by it.
const StreamCost = 4

// NewStreams is daemon's counter of streams as its settings give the
// caps: perJob and perUser as Cap reads them (0 the defaults, -1 none);
// total > 0 a fixed cap on all streams, 0 one derived from the limit of
// open files beyond reserve (DerivedTotal). err is what a refusal wraps
// (nil: ErrTooMany).
func NewStreams(daemon string, perJob, perUser, total, reserve int, err error) *Streams {
	s := &Streams{Daemon: daemon, Err: err, PerJob: Cap(perJob, DefaultPerJob), PerUser: Cap(perUser, DefaultPerUser)}
	if total > 0 {
		s.Total = func() int { return total }
	} else {
		s.Total = DerivedTotal(reserve, StreamCost)
	}
	return s
}

// Streams counts open streams by job, by user and in all, and refuses
// one past a cap. The zero value caps nothing.
type Streams struct {
	// Daemon names the process in refusals ("schedd", "nodelet").
	Daemon string
	// PerJob and PerUser cap the streams of one job and of one user;
	// 0 or less: no cap.
	PerJob, PerUser int
	// Total is the cap on all streams together, asked at each Acquire
	// (it may follow the limit of open files); nil or ≤ 0: no cap.
	Total func() int
	// Err is the error a refusal wraps; nil: ErrTooMany.
	Err error

	mu    sync.Mutex
	jobs  map[uint64]int
	users map[int]int
	total int
}

// Acquire takes a slot for a stream of job opened by user uid (name for
// messages). release frees it; calling it again does nothing. Past a cap
// the error wraps Err (ErrTooMany) and says which cap and how to raise it.
func (s *Streams) Acquire(uid int, user string, job uint64) (release func(), err error) {
	total := 0
	if s.Total != nil {
		total = s.Total()
	}
	tooMany := s.Err
	if tooMany == nil {
		tooMany = ErrTooMany
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jobs == nil {
		s.jobs, s.users = map[uint64]int{}, map[int]int{}
	}
	switch {
	case s.PerJob > 0 && s.jobs[job] >= s.PerJob:
		return nil, fmt.Errorf("%w: job %d has %d terminal and app streams open, the most %s allows one job (--max-streams-per-job, max_streams_per_job); close one, or ask an administrator to raise the cap",
			tooMany, job, s.jobs[job], s.Daemon)
	case s.PerUser > 0 && s.users[uid] >= s.PerUser:
		return nil, fmt.Errorf("%w: user %s has %d terminal and app streams open, the most %s allows one user (--max-streams-per-user, max_streams_per_user); close one, or ask an administrator to raise the cap",
			tooMany, user, s.users[uid], s.Daemon)
	case total > 0 && s.total >= total:
		return nil, fmt.Errorf("%w: %s holds %d terminal and app streams, the most it takes from all users together, so that the nodes' traffic keeps open files (--max-streams, max_streams; by default derived from its limit of open files); retry later, or ask an administrator to raise the cap or the limit",
			tooMany, s.Daemon, s.total)
	}
	s.jobs[job]++
	s.users[uid]++
	s.total++
	var once sync.Once
	return func() { once.Do(func() { s.release(uid, job) }) }, nil
}

func (s *Streams) release(uid int, job uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jobs[job]--; s.jobs[job] <= 0 {
		delete(s.jobs, job)
	}
	if s.users[uid]--; s.users[uid] <= 0 {
		delete(s.users, uid)
	}
	s.total--
}

// Open is how many streams are open: of job, of user uid, in all.
func (s *Streams) Open(uid int, job uint64) (ofJob, ofUser, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs[job], s.users[uid], s.total
}

// NoFile is the soft limit of open files in force now (0 when unknown).
func NoFile() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur > 1<<30 {
		return 1 << 30
	}
	return int(lim.Cur)
}

// DefaultReserve is the open files kept for the nodes' traffic and the
// daemon's own files under a limit of nofile: an eighth of it, at least
// 64, at most half.
func DefaultReserve(nofile int) int {
	return min(max(64, nofile/8), nofile/2)
}

// DerivedTotal is the cap on all streams a daemon derives from its
// limit of open files now: what the limit leaves beyond reserve (0:
// DefaultReserve), divided by per, the open files one stream costs
// with a margin for the users' other connections. At least 1.
func DerivedTotal(reserve, per int) func() int {
	return func() int {
		n := NoFile()
		if n <= 0 {
			return 0
		}
		r := reserve
		if r <= 0 {
			r = DefaultReserve(n)
		}
		return max(1, (n-r)/per)
	}
}
