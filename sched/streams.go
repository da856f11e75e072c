package sched

import (
	"context"
	"net"
	"sync"

	"github.com/troupe-hpc/troupe/internal/auth"
	"github.com/troupe-hpc/troupe/internal/connlimit"
	"github.com/troupe-hpc/troupe/sched/fault"
)

// newStreams is the counter of cfg's caps on terminal and upgraded
// /apps streams.
func newStreams(cfg Config) *connlimit.Streams {
	return connlimit.NewStreams("schedd", cfg.MaxStreamsPerJob, cfg.MaxStreamsPerUser, cfg.MaxStreams, cfg.FDReserve, fault.ErrTooMany)
}

// takeStream takes a slot for a stream of job opened by ctx's caller
// (a trusted caller without an identity counts as uid -1).
func (s *sessions) takeStream(ctx context.Context, job uint64) (release func(), err error) {
	uid, user := -1, "trusted"
	if id, ok := auth.FromContext(ctx); ok {
		uid, user = id.UID, id.User
	}
	release, err = s.streams.Acquire(uid, user, job)
	if err != nil {
		s.metrics.refused.Inc()
		s.log.Debug("stream refused", "job", job, "user", user, "err", err)
	}
	return release, err
}

// releasingConn is a stream's connection that frees its slot when
// closed.
type releasingConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *releasingConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
