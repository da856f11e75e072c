package sched

import (
	"context"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/backoff"
	"github.com/troupe-hpc/troupe/sched/state"
)

// IsLeader reports whether this server leads (takes writes, schedules).
func (s *replica) IsLeader() bool { return s.raft.IsLeader() }

// leaderAPI is the API address of the current leader ("" unknown): as
// the leader told this server over raft (known as soon as the leader
// has reached it, replayed or not), else as it recorded it in the state
// when it took office.
func (s *replica) leaderAPI() string {
	if api := s.raft.LeaderAPI(); api != "" {
		return api
	}
	id := s.raft.Leader()
	if id == "" {
		return ""
	}
	return s.st.Snapshot().ServerAPI(id)
}

// Run does the leader's work until ctx ends: while this server leads it
// schedules, charges usage and checks node timeouts (schedule); when it
// loses leadership it stops, and starts afresh when it leads again.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.exportLoop(ctx) }) // every server, leader or not (export.go)
	defer wg.Wait()
	for ctx.Err() == nil {
		if !s.raft.IsLeader() {
			if backoff.Sleep(ctx, 20*time.Millisecond) != nil {
				return
			}
			continue
		}
		lctx, cancel := context.WithCancel(ctx)
		go func() {
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-lctx.Done():
					return
				case <-t.C:
					if !s.raft.IsLeader() {
						cancel()
						return
					}
				}
			}
		}()
		if err := s.takeOffice(lctx); err != nil {
			if lctx.Err() == nil {
				s.log.Error("taking office as leader", "err", err)
				time.Sleep(100 * time.Millisecond)
			}
		} else {
			var mail sync.WaitGroup
			mail.Go(func() { s.mailLoop(lctx) })
			s.schedule(lctx)
			cancel()
			mail.Wait()
		}
		cancel()
		if ctx.Err() == nil {
			s.log.Info("no longer the raft leader: stopped scheduling")
		}
	}
}

// takeOffice prepares a new leader: it applies everything committed,
// gives every node a full timeout from now, records its API address for
// the followers and puts its partitions config in force.
func (s *Server) takeOffice(ctx context.Context) error {
	if !s.raft.Multi() {
		return nil
	}
	if err := s.raft.Barrier(ctx); err != nil {
		return err
	}
	s.fleet.mu.Lock()
	s.fleet.leadSince = s.cfg.Clock()
	s.fleet.seen = map[string]time.Time{}
	s.fleet.mu.Unlock()
	s.metrics.stages.forget() // what another leader committed was not seen
	if id := s.cfg.Raft.ID; id != "" && s.cfg.APIAddr != "" && s.st.Snapshot().ServerAPI(id) != s.cfg.APIAddr {
		if _, err := s.apply(ctx, state.Command{Act: state.PutServer{Server: &state.Server{ID: id, API: s.cfg.APIAddr}}}); err != nil {
			return err
		}
	}
	if s.config != nil {
		if err := s.putConfig(ctx, s.config); err != nil {
			return err
		}
	}
	s.log.Info("leading the raft cluster", "id", s.cfg.Raft.ID, "api", s.cfg.APIAddr)
	return nil
}
