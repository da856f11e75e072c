package sched

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/accounting"
	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/admission"
	"github.com/troupe-hpc/troupe/sched/httpapi"
	"github.com/troupe-hpc/troupe/sched/state"
)

// The Server as the HTTP layer sees it: the methods of
// httpapi.Controller, each answering views (view.go), never rows. The
// handlers, routes, authentication and the rules of who may call what
// are sched/httpapi's.

var _ httpapi.Controller = (*Server)(nil)

// Handler serves the /v1 API and the jobs' services (httpapi.API.Handler).
func (s *Server) Handler() http.Handler { return s.api().Handler() }

// TCPHandler is the API for a TCP listener, authenticated by bearer
// tokens (httpapi.API.TCP).
func (s *Server) TCPHandler(trustAnonymous bool) http.Handler { return s.api().TCP(trustAnonymous) }

// ReadOnlyHandler serves the API's public reads to Anonymous callers
// (httpapi.API.ReadOnly; the web page before someone logs in).
func (s *Server) ReadOnlyHandler() http.Handler { return s.api().ReadOnly() }

// CatchUpGate answers reads 503 until this peer has replayed its log
// (httpapi.API.CatchUpGate).
func (s *Server) CatchUpGate(h http.Handler) http.Handler { return s.api().CatchUpGate(h) }

// Anonymous is who a caller of ReadOnlyHandler is.
var Anonymous = httpapi.Anonymous

func (s *Server) api() *httpapi.API { return httpapi.New(s, s.log) }

// block serves a blocking query: with w.Index it waits (up to w.For)
// until the state index passes it, then returns a snapshot.
func (s *replica) block(ctx context.Context, w httpapi.Wait) (*state.Snapshot, uint64) {
	return s.blockOn(ctx, w, (*state.Snapshot).Index)
}

// blockOn is block on the index that index reads from a snapshot, waking
// only when its watch set fires: a node's assignments wait on that
// node's jobs alone (state.Snapshot.NodeIndex).
func (s *replica) blockOn(ctx context.Context, w httpapi.Wait, index func(*state.Snapshot) (uint64, memdb.WatchSet)) (*state.Snapshot, uint64) {
	ctx, cancel := context.WithTimeout(ctx, w.For)
	defer cancel()
	for {
		v := s.st.Snapshot()
		idx, ws := index(v)
		if w.Index == 0 || idx > w.Index || s.indexFromOtherHistory(w.Index) || ws.WatchCtx(ctx) != nil {
			return v, idx
		}
	}
}

// indexFromOtherHistory tells whether a blocking query's index is above
// every index the leader's log holds: the client saw a state this one
// does not descend from (schedd started on an empty data dir, a snapshot
// restored), and waiting for the index would last the whole wait. It is
// answered at once, so that the client resyncs with the state in force.
// A follower does not know the leader's last index: a query there
// waits, as a read after a write does while the follower catches up.
func (s *replica) indexFromOtherHistory(index uint64) bool {
	return s.raft.IsLeader() && index > s.raft.LastIndex()
}

// Check is submit's admission with nothing stored (bsub --dry-run), and
// notes on what may keep the job pending.
func (s *lifecycle) Check(ctx context.Context, req api.SubmitRequest) (api.SubmitCheck, error) {
	v := s.st.Snapshot()
	j, err := s.admit(v, req, nil)
	if err != nil {
		return api.SubmitCheck{}, err
	}
	n, capacity := s.partitionCapacity(v, j.Partition)
	return api.SubmitCheck{Partition: j.Partition, Account: j.Account, Walltime: j.Walltime,
		Notes: admission.Notes(j, n, capacity)}, nil
}

// ListJobs answers the jobs q picks, as views, in id order.
func (s *lifecycle) ListJobs(ctx context.Context, w httpapi.Wait, q httpapi.JobsQuery) (uint64, iter.Seq[api.Job]) {
	v, idx := s.block(ctx, w)
	if q.Array != 0 {
		return idx, s.listElements(ctx, v, &q)
	}
	jobs := candidates(v, &q)
	return idx, func(yield func(api.Job) bool) {
		n := 0
		for j := range jobs {
			if !matchJob(&q, j) {
				continue
			}
			if q.Limit > 0 && n == q.Limit {
				return
			}
			if !yield(s.view(v, j)) {
				return
			}
			n++
		}
	}
}

// listElements answers the elements of job array q.Array that q picks,
// in index order: each as the state shows it (state.Snapshot.ElementView),
// and one that left the state for the accounting store (an ended
// element leaves as soon as the store holds it) from its last run's
// record there while it ended within keep_ended, as long as a plain
// job stays listed after its end. The store is read only when the
// array has such an element, for its records that ended since.
func (s *lifecycle) listElements(ctx context.Context, v *state.Snapshot, q *httpapi.JobsQuery) iter.Seq[api.Job] {
	return func(yield func(api.Job) bool) {
		p := v.Job(q.Array)
		if p == nil || p.Array == nil {
			return
		}
		var stored map[int]api.Job // read at the first element the state no longer holds
		n := 0
		for pos := range p.Array.Count {
			idx := p.Array.Indices.At(pos)
			var j api.Job
			if e, ok := v.ElementView(p, idx); ok {
				if !matchJob(q, e) {
					continue
				}
				j = s.view(v, e)
			} else {
				if stored == nil {
					stored = s.ledger.storedElements(ctx, p.ID)
				}
				h, ok := stored[idx]
				if !ok || !matchFields(q, h.ID, h.User, h.Partition, h.State) {
					continue
				}
				j = h
			}
			if q.Limit > 0 && n == q.Limit || !yield(j) {
				return
			}
			n++
		}
	}
}

// storedElements are the elements of job array id that ended within
// keep_ended, by index, as their last run's record in the accounting
// store shows them (api.JobFromHistory). A store that fails is logged:
// the answer then shows what the state holds.
func (s *ledger) storedElements(ctx context.Context, id uint64) map[int]api.Job {
	out := map[int]api.Job{}
	f := api.HistoryFilter{IDs: []uint64{id}, EndedFrom: s.cfg.Clock().Add(-s.cfg.KeepEnded)}
	err := s.acct.Each(ctx, f, func(h api.HistoryJob) error {
		if h.ArrayID == id {
			if prev, ok := out[h.ArrayIndex]; !ok || h.Requeues >= prev.Requeues {
				out[h.ArrayIndex] = api.JobFromHistory(h)
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		s.log.Error("reading job array elements from the accounting store", "array", id, "err", err)
	}
	return out
}

// Job answers the job ref names: a whole job array, or one element.
func (s *lifecycle) Job(ctx context.Context, w httpapi.Wait, ref api.JobRef) (api.Job, uint64, error) {
	v, idx := s.block(ctx, w)
	j := v.Job(ref.ID)
	if j != nil && ref.Element {
		if j.Array == nil {
			return api.Job{}, idx, fmt.Errorf("job %s: job %d is not a job array: %w", ref, ref.ID, state.ErrNotFound)
		}
		j, _ = v.ElementView(j, ref.Index)
	}
	if j == nil {
		// The index goes with the refusal too: a client that wrote the
		// job at a later index knows this peer has not applied it yet.
		return api.Job{}, idx, fmt.Errorf("job %s: %w", ref, state.ErrNotFound)
	}
	return s.view(v, j), idx, nil
}

// JobRow is the id of the job row ref names: an element "12[5]" has a
// row of its own once it came up (see state's arrays).
func (s *lifecycle) JobRow(ref api.JobRef) (uint64, error) {
	if !ref.Element {
		return ref.ID, nil
	}
	if e := s.st.Snapshot().Element(ref.ID, ref.Index); e != nil {
		return e.ID, nil
	}
	return 0, fmt.Errorf("job %s: %w (an element that has not come up yet, has ended and been purged, or does not exist)", ref, state.ErrNotFound)
}

// Control kills (bkill -d with KillDone), holds or releases a job, a
// whole job array, or one element of an array: its owner or an admin
// may (mayControl). It answers the job and the state index once the
// change is applied (at or past the change's entry), as Submit does.
func (s *lifecycle) Control(ctx context.Context, op httpapi.Op, ref api.JobRef) (api.Job, uint64, error) {
	if j := s.st.Snapshot().Job(ref.ID); j != nil {
		if err := mayControl(ctx, j, doControl); err != nil {
			return api.Job{}, 0, err
		}
	}
	on := state.JobRef{ID: ref.ID}
	if ref.Element {
		i := ref.Index
		on.Index = &i
	}
	var c state.Command
	switch op {
	case httpapi.Kill, httpapi.KillDone:
		c = state.Command{Act: state.Kill{Job: on, Done: op == httpapi.KillDone}}
	case httpapi.Hold:
		c = state.Command{Act: state.Hold{Job: on}}
	case httpapi.Release:
		c = state.Command{Act: state.Release{Job: on}}
	case httpapi.Suspend, httpapi.Resume:
		return s.suspendControl(ctx, op, ref)
	default:
		return api.Job{}, 0, fmt.Errorf("%w: no job operation %q", ErrInvalid, op)
	}
	v, err := s.apply(ctx, c)
	if err != nil {
		return api.Job{}, 0, err
	}
	s.wake()
	idx, _ := s.st.Snapshot().Index() // the change is applied: idx is at or past it
	return jobView(v.(*state.Job), jobExtras{}), idx, nil
}

// suspendControl suspends the job ref names (its containers frozen, its
// CPUs and GPUs free for others; state.Suspend) or asks that a
// suspended one resume (state.Resume: it does once its CPUs and GPUs
// are free again). The route lets admins only. While a schedd of the
// previous release is in the cluster neither can be written, and both
// are refused (writable).
func (s *lifecycle) suspendControl(ctx context.Context, op httpapi.Op, ref api.JobRef) (api.Job, uint64, error) {
	id, err := s.JobRow(ref)
	if err != nil {
		return api.Job{}, 0, err
	}
	by := "root"
	if who, ok := caller(ctx); ok && who.User != "" {
		by = who.User
	}
	var act state.Act = state.Suspend{Job: id, By: by, Reason: "suspended by " + by}
	if op == httpapi.Resume {
		act = state.Resume{Job: id}
	}
	if err := s.writable(act); err != nil {
		return api.Job{}, 0, err
	}
	v, err := s.apply(ctx, state.Command{Act: act})
	if err != nil {
		return api.Job{}, 0, err
	}
	s.wake()
	idx, _ := s.st.Snapshot().Index()
	return jobView(v.(*state.Job), jobExtras{}), idx, nil
}

// SignalJob records a signal for the job ref names (bkill -s; see
// state.SignalJob): its owner or an admin may. It answers the state
// index as Control does.
func (s *lifecycle) SignalJob(ctx context.Context, ref api.JobRef, req api.SignalJob) (api.Job, uint64, error) {
	id, err := s.JobRow(ref)
	if err != nil {
		return api.Job{}, 0, err
	}
	if j := s.st.Snapshot().Job(id); j != nil {
		if err := mayControl(ctx, j, doControl); err != nil {
			return api.Job{}, 0, err
		}
	}
	sig, err := api.ParseSignal(req.Signal)
	if err != nil {
		return api.Job{}, 0, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	v, err := s.apply(ctx, state.Command{Act: state.SignalJob{Signal: &state.Signal{JobID: id, Signal: int(sig), Host: req.Host}}})
	if err != nil {
		return api.Job{}, 0, err
	}
	s.wake()
	idx, _ := s.st.Snapshot().Index()
	return jobView(v.(*state.Job), jobExtras{}), idx, nil
}

// ListNodes is the node list as bhosts shows it (NodeView).
func (s *fleet) ListNodes(ctx context.Context, w httpapi.Wait) api.NodeList {
	v, idx := s.block(ctx, w)
	return api.NodeList{Nodes: s.NodeView(v), Index: idx}
}

// RegisterNode records a nodelet and answers its lease; with credential
// (a register by the join token) it also issues the node's credential.
func (s *fleet) RegisterNode(ctx context.Context, reg api.NodeRegister, credential bool) (api.NodeRegistered, error) {
	n, err := s.Register(ctx, reg)
	if err != nil {
		return api.NodeRegistered{}, err
	}
	view := nodeView(n)
	if credential {
		if view.Credential, err = s.access.nodeCredential(ctx, reg.Name); err != nil {
			return api.NodeRegistered{}, err
		}
	}
	return api.NodeRegistered{Node: view, NodeLease: Lease(s.cfg.NodeTimeout)}, nil
}

// NodeHeartbeat notes a registered node alive (HeartbeatFrom), takes
// its health-check verdict (nodeHealth) and answers its lease.
func (s *fleet) NodeHeartbeat(ctx context.Context, node string, hb api.NodeHeartbeat) (api.NodeLease, error) {
	if s.st.Snapshot().Node(node) == nil {
		return api.NodeLease{}, fmt.Errorf("node %q: %w; register first", node, state.ErrNotFound)
	}
	if err := s.HeartbeatFrom(ctx, node, hb.Instance); err != nil {
		return api.NodeLease{}, err
	}
	if hb.Health != nil {
		if err := s.nodeHealth(ctx, node, *hb.Health); err != nil {
			return api.NodeLease{}, err
		}
	}
	return Lease(s.cfg.NodeTimeout), nil
}

// NodeAssignments notes a registered node alive and answers its
// assignments, waiting on the node's own index (state.Snapshot.NodeIndex).
func (s *fleet) NodeAssignments(ctx context.Context, w httpapi.Wait, node string) (api.Assignments, error) {
	if s.st.Snapshot().Node(node) != nil {
		if err := s.HeartbeatFrom(ctx, node, ""); err != nil {
			return api.Assignments{}, err
		}
	}
	if until := s.st.Snapshot().AdoptUntil(); w.Index != 0 {
		// The adoption window's end changes the answer (a partly adopted
		// job leaves it): the wait ends with the window.
		if left := until.Sub(s.cfg.Clock()); left > 0 && left < w.For {
			w.For = left + 10*time.Millisecond
		}
	}
	v, idx := s.blockOn(ctx, w, func(v *state.Snapshot) (uint64, memdb.WatchSet) {
		if h := testHookAssignWoke.Load(); h != nil {
			defer (*h)(s.replica, node)
		}
		return v.NodeIndex(node)
	})
	now := s.cfg.Clock()
	as := api.Assignments{Assignments: AssignmentsAt(v, node, now), Index: idx, NoJobsYet: v.HoldsNoJob()}
	if until := v.AdoptUntil(); now.Before(until) {
		as.AdoptUntil = until
	}
	return as, nil
}

// ListPartitions is the partitions with their nodes and limits.
func (s *fleet) ListPartitions(ctx context.Context, w httpapi.Wait) api.PartitionList {
	v, idx := s.block(ctx, w)
	list := Partitions(v, s.nodes.empty(v))
	list.Index = idx
	list.MaxJobInput, list.MaxQueuedPerUser = s.cfg.MaxJobInput, max(s.cfg.MaxQueuedPerUser, 0)
	return list
}

// ListFairShare is the fair-share tree.
func (s *ledger) ListFairShare(ctx context.Context, w httpapi.Wait) api.FairShareList {
	v, idx := s.block(ctx, w)
	list := FairShare(v)
	list.Index = idx
	return list
}

// JobHistory answers bhist from the accounting store and the ended
// jobs still in the replicated state, each run once, oldest end first:
// the records are yielded as they are read off the store, merged with
// the state's, so that a long history is never held (with q.Limit, the
// last Limit of each are, to keep the last Limit of both). An error
// (the store's) is yielded last.
func (s *ledger) JobHistory(ctx context.Context, w httpapi.Wait, q api.HistoryFilter) (uint64, iter.Seq2[api.HistoryJob, error]) {
	v, idx := s.block(ctx, w)
	return idx, func(yield func(api.HistoryJob, error) bool) {
		live := liveRuns(v, &q)
		seen := make(map[accounting.Key]bool, len(live))
		for _, r := range live {
			seen[accounting.Key{ID: r.id, Run: r.reqs}] = true
		}
		if q.Limit > 0 {
			out := make([]api.HistoryJob, 0, len(live))
			for _, r := range live {
				out = append(out, r.record())
			}
			err := s.acct.Each(ctx, q, func(h api.HistoryJob) error {
				if !seen[accounting.KeyOf(&h)] {
					out = append(out, h)
				}
				return nil
			})
			if err != nil {
				yield(api.HistoryJob{}, err)
				return
			}
			for _, h := range sortHistory(out, q.Limit) {
				if !yield(h, nil) {
					return
				}
			}
			return
		}
		i := 0
		errStop := errors.New("stopped")
		err := s.acct.Each(ctx, q, func(h api.HistoryJob) error {
			if seen[accounting.KeyOf(&h)] {
				return nil
			}
			for ; i < len(live) && compareRun(live[i].ended, live[i].id, live[i].reqs, h.Ended, h.ID, h.Requeues) < 0; i++ {
				if !yield(live[i].record(), nil) {
					return errStop
				}
			}
			if !yield(h, nil) {
				return errStop
			}
			return nil
		})
		switch {
		case errors.Is(err, errStop):
			return
		case err != nil:
			yield(api.HistoryJob{}, err)
			return
		}
		for ; i < len(live); i++ {
			if !yield(live[i].record(), nil) {
				return
			}
		}
	}
}

// AccountingSummary answers bacct: the ended jobs the query picks
// (store and state, each run once) summed per group.
func (s *ledger) AccountingSummary(ctx context.Context, q api.HistoryFilter, group string) (api.Accounting, error) {
	rows, err := s.acct.Summary(ctx, q, group)
	if err != nil {
		if errors.Is(err, accounting.ErrInvalid) {
			err = fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return api.Accounting{}, err
	}
	live := stateHistory(s.st.Snapshot(), q)
	keys := make([]accounting.Key, len(live))
	for i := range live {
		keys[i] = accounting.KeyOf(&live[i])
	}
	has, err := s.acct.Has(ctx, keys)
	if err != nil {
		return api.Accounting{}, err
	}
	byGroup := map[string]int{}
	for i, row := range rows {
		byGroup[row.Group] = i
	}
	for i := range live {
		if has[keys[i]] {
			continue
		}
		g := accounting.GroupOf(&live[i], group)
		at, ok := byGroup[g]
		if !ok {
			rows = append(rows, api.AccountingRow{Group: g})
			at = len(rows) - 1
			byGroup[g] = at
		}
		accounting.Add(&rows[at], &live[i])
	}
	slices.SortFunc(rows, func(a, b api.AccountingRow) int { return strings.Compare(a.Group, b.Group) })
	res := api.Accounting{GroupBy: group, Rows: rows}
	for _, row := range rows {
		res.Total.Jobs += row.Jobs
		res.Total.Completed += row.Completed
		res.Total.Failed += row.Failed
		res.Total.Wait += row.Wait
		res.Total.Run += row.Run
		res.Total.CPUTime += row.CPUTime
		res.Total.GPUHours += row.GPUHours
	}
	return res, nil
}

// JoinPeer adds a raft peer as a voter.
func (s *Server) JoinPeer(ctx context.Context, req api.RaftJoin) error {
	if req.ID == "" || req.Addr == "" {
		return fmt.Errorf("%w: a joining peer needs an id and a raft address", ErrInvalid)
	}
	if err := s.raft.AddVoter(req.ID, req.Addr); err != nil {
		return err
	}
	s.log.Info("raft peer joined", "id", req.ID, "addr", req.Addr)
	return nil
}

// Leadership says where this server stands in its raft cluster.
func (s *Server) Leadership() httpapi.Leadership {
	if !s.raft.Multi() {
		return httpapi.Leadership{Leader: true, CaughtUp: true}
	}
	l := httpapi.Leadership{Multi: true, Leader: s.raft.IsLeader(), CaughtUp: s.raft.CaughtUp()}
	if !l.CaughtUp {
		l.Applied, l.OnDisk = s.raft.Replay()
	}
	if !l.Leader {
		l.LeaderAPI = s.leaderAPI()
	}
	return l
}
