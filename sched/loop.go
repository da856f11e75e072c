package sched

import (
	"context"
	"sort"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/core"
	"github.com/troupe-hpc/troupe/sched/state"
)

// idlePass bounds how long the loop sleeps without a state change.
const idlePass = 5 * time.Second

// schedule runs the leader's loop until ctx ends: on every state change it hands a snapshot
// and the time to the pure core and commits the plan it returns; every
// ChargeEvery it charges running jobs' usage (a raft command, so every
// replica charges the same).
func (s *Server) schedule(ctx context.Context) {
	for {
		if now := s.cfg.Clock(); now.Sub(s.charged) >= s.cfg.ChargeEvery {
			if err := s.ChargeUsage(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("charging usage", "err", err)
			}
			s.charged = now
		}
		v := s.st.Snapshot()
		_, ws := v.Index()
		now := s.cfg.Clock()
		if silent := s.silentNodes(v, now); len(silent) > 0 {
			if err := s.failNodes(ctx, v, silent); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Error("marking silent nodes down", "err", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		late, nextLate := v.Late(now)
		if len(late) > 0 {
			if _, err := s.apply(ctx, state.Command{Act: state.Timeout{Jobs: late}}); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Error("ending jobs past their walltime", "err", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		s.mu.Lock()
		hold := s.placeHold
		s.mu.Unlock()
		if now.Before(hold) {
			// After a restore: the nodes announce what they run first.
			wctx, cancel := context.WithTimeout(ctx, min(hold.Sub(now), idlePass))
			<-wctx.Done()
			cancel()
			if ctx.Err() != nil {
				return
			}
			continue
		}
		began := time.Now()
		snap := coreSnapshot(v, s.nodes.open(v), now)
		plan := core.Schedule(snap, now)
		s.metrics.pass.Observe(time.Since(began).Seconds())
		s.setStarts(plan.Starts)
		s.setRanks(ranks(snap, now))
		if !plan.Empty() {
			sp := fromCore(plan)
			s.metrics.stages.placing(v, sp, s.cfg.Clock())
			_, err := s.apply(ctx, state.Command{Act: state.Place{Plan: sp}})
			s.metrics.stages.placed(s.st.Snapshot(), sp, err == nil)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Error("committing plan", "err", err)
				time.Sleep(100 * time.Millisecond)
			} else {
				s.metrics.placements.Add(float64(len(plan.Placements)))
			}
			continue
		}
		if s.idle != nil {
			idx, _ := v.Index()
			s.idle(idx)
		}
		wait := min(idlePass, s.cfg.NodeTimeout/4)
		if !nextLate.IsZero() && nextLate.Sub(now) < wait {
			wait = max(nextLate.Sub(now), 10*time.Millisecond)
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		select {
		case <-s.kick:
		case <-wctx.Done():
		case <-watch(wctx, ws):
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
	}
}

func watch(ctx context.Context, ws interface{ WatchCtx(context.Context) error }) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		_ = ws.WatchCtx(ctx)
		close(ch)
	}()
	return ch
}

// setStarts keeps the last pass's start estimates of reserved jobs.
func (s *Server) setStarts(est []core.StartEstimate) {
	m := make(map[uint64]time.Time, len(est))
	for _, e := range est {
		m[e.JobID] = e.Start
	}
	s.mu.Lock()
	s.starts = m
	s.mu.Unlock()
}

// rank is a pending job's priority and queue position in the last pass.
type rank struct {
	factors  api.PriorityFactors
	pos, len int
}

// ranks computes every pending job's weighted priority factors and its
// position among the pending jobs of its partition: the eligible ones in
// the order the core considers them, then those the eligible stage keeps
// out (a dependency, a partition limit), by priority (ties in queue
// order). Held jobs are not pending: they have neither.
func ranks(snap core.Snapshot, now time.Time) map[uint64]rank {
	factors, order := core.Ranking(snap, now)
	w := snap.Policy.Weights
	// Worked out by queue position, then put in the map once: with a
	// backlog of 100,000 jobs, a map lookup and store per step was most
	// of this function's time, which every pass spends. Held jobs get no
	// rank; jobs the core kept out come after the ranked ones.
	rs := make([]rank, len(snap.Queue))
	ranked := make([]bool, len(snap.Queue))
	for _, i := range order {
		ranked[i] = true
	}
	var rest []int
	for i, f := range factors {
		if snap.Queue[i].Held {
			continue
		}
		rs[i].factors = api.PriorityFactors{
			Age: w.Age * f.Age, FairShare: w.FairShare * f.FairShare, JobSize: w.JobSize * f.JobSize,
			Partition: w.Partition * f.Partition, Nice: -f.Nice, Total: f.Priority,
		}
		if !ranked[i] {
			rest = append(rest, i)
		}
	}
	sort.SliceStable(rest, func(a, b int) bool { return factors[rest[a]].Priority > factors[rest[b]].Priority })
	seq := make([]int, 0, len(snap.Queue))
	for _, i := range order {
		seq = append(seq, int(i))
	}
	seq = append(seq, rest...)
	count := map[string]int{}
	for _, i := range seq {
		p := snap.Queue[i].Partition
		count[p]++
		rs[i].pos = count[p]
	}
	out := make(map[uint64]rank, len(snap.Queue))
	for i := range snap.Queue {
		if snap.Queue[i].Held {
			continue
		}
		rs[i].len = count[snap.Queue[i].Partition]
		out[snap.Queue[i].ID] = rs[i]
	}
	return out
}

// setRanks keeps the last pass's priorities and queue positions.
func (s *Server) setRanks(r map[uint64]rank) {
	s.mu.Lock()
	s.ranks = r
	s.mu.Unlock()
}
