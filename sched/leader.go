package sched

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/backoff"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// IsLeader reports whether this server leads (takes writes, schedules).
func (s *Server) IsLeader() bool { return s.raft.IsLeader() }

// leaderAPI is the API address of the current leader ("" unknown): as
// the leader told this server over raft (known as soon as the leader
// has reached it, replayed or not), else as it recorded it in the state
// when it took office.
func (s *Server) leaderAPI() string {
	if api := s.raft.LeaderAPI(); api != "" {
		return api
	}
	id := s.raft.Leader()
	if id == "" {
		return ""
	}
	return s.st.Snapshot().ServerAPI(id)
}

// redirectToLeader answers a request a follower must not serve itself:
// writes, the nodes' endpoints (heartbeats are leader-local), and, while
// it has not yet applied its log up to what it had on disk (a restarted
// or lagging peer), reads too. It answers 307 to the leader's API
// address (as raft knows it), or 503 while none is known; true when it
// answered. A lone server and the leader serve everything.
func (s *Server) redirectToLeader(w http.ResponseWriter, r *http.Request) bool {
	if !s.raft.Multi() || s.raft.IsLeader() {
		return false
	}
	caught := s.raft.CaughtUp()
	if caught && r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/v1/nodes/") && r.URL.Path != "/v1/snapshot" &&
		!strings.HasPrefix(r.URL.Path, AppsPrefix) {
		return false // reads come from this replica's state
	}
	api := s.leaderAPI()
	if api == "" {
		w.Header().Set("Retry-After", "1")
		if !caught {
			writeErr(w, s.replaying())
			return true
		}
		writeErr(w, fmt.Errorf("%w: no leader elected yet; retry", raftlog.ErrNotLeader))
		return true
	}
	http.Redirect(w, r, strings.TrimRight(api, "/")+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	return true
}

// replaying is the answer of a peer that has not applied its log up to
// what it had on disk, and knows no leader to send the caller to.
func (s *Server) replaying() error {
	applied, disk := s.raft.Replay()
	return fmt.Errorf("%w: this peer is still replaying its raft log (applied %d of %d) and knows no leader yet; retry", raftlog.ErrNotLeader, applied, disk)
}

// CatchUpGate guards a handler that serves from this replica's state
// without a redirect (the unix socket: its callers' identity does not
// travel to the leader): until the peer has applied its log up to what
// it had on disk, reads are answered 503 with Retry-After (never an
// empty or old queue); writes go through (raft sends them to the leader
// or refuses them).
func (s *Server) CatchUpGate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.raft.Multi() && r.Method == http.MethodGet && !s.raft.CaughtUp() {
			w.Header().Set("Retry-After", "1")
			applied, disk := s.raft.Replay()
			err := fmt.Errorf("%w: this peer is still replaying its raft log (applied %d of %d); retry", raftlog.ErrNotLeader, applied, disk)
			if api := s.leaderAPI(); api != "" {
				err = fmt.Errorf("%w; the leader serves at %s", err, api)
			}
			writeErr(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
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
	s.mu.Lock()
	s.leadSince = s.cfg.Clock()
	s.seen = map[string]time.Time{}
	s.charged = time.Time{}
	s.mu.Unlock()
	s.metrics.stages.forget() // what another leader committed was not seen
	if id := s.cfg.Raft.ID; id != "" && s.cfg.APIAddr != "" && s.st.Snapshot().ServerAPI(id) != s.cfg.APIAddr {
		if _, err := s.apply(ctx, state.Command{Kind: state.CmdServer, Server: &state.Server{ID: id, API: s.cfg.APIAddr}}); err != nil {
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

func (s *Server) handleRaftJoin(w http.ResponseWriter, r *http.Request) {
	var req api.RaftJoin
	if !decode(w, r, &req) {
		return
	}
	if req.ID == "" || req.Addr == "" {
		writeErr(w, fmt.Errorf("%w: a joining peer needs an id and a raft address", ErrInvalid))
		return
	}
	if err := s.raft.AddVoter(req.ID, req.Addr); err != nil {
		writeErr(w, err)
		return
	}
	s.log.Info("raft peer joined", "id", req.ID, "addr", req.Addr)
	writeJSON(w, http.StatusOK, 0, struct{}{})
}
