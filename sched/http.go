package sched

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/admission"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

const (
	maxBody     = 4 << 20
	defaultWait = 30 * time.Second
	maxWait     = 5 * time.Minute
)

// Handler serves the /v1 API (see internal/api for the endpoints and
// openapi/openapi.json for their document): the routes of s.routes.
func (s *Server) Handler() http.Handler {
	m := s.mux()
	// A job's web services (apps.go): not part of the /v1 API, so not in
	// its route table or OpenAPI document.
	m.HandleFunc(AppsPrefix+"{id}/{service}/{rest...}", s.handleApp)
	m.HandleFunc(AppsPrefix+"{id}/{service}", s.handleApp)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(api.RequestHeader); id != "" && r.Method == http.MethodPost {
			r = r.WithContext(withRequestID(r.Context(), id))
		}
		m.ServeHTTP(w, r)
	})
}

type requestIDKey struct{}

// withRequestID carries a write's request id (api.RequestHeader) to the
// command it becomes: kill, hold, release and signal are applied once
// per id (state.Command.Request).
func withRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// requestID is the request id ctx carries ("" none).
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	if !decode(w, r, &req) {
		return
	}
	asCaller(r.Context(), &req)
	res, err := s.Submit(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, res.Index, res)
}

// handleSubmitBatch stores several jobs in one raft entry (bsub --count,
// bsub a.hcl b.hcl): all of them, or none and why.
func (s *Server) handleSubmitBatch(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitBatch
	if !decode(w, r, &req) {
		return
	}
	for i := range req.Jobs {
		asCaller(r.Context(), &req.Jobs[i])
	}
	res, err := s.SubmitBatch(r.Context(), req.Jobs)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, res[0].Index, api.SubmitBatchResponse{Jobs: res})
}

// handleCheck answers bsub --dry-run: submit's admission (validation,
// partition and user limits, queue caps, whether any nodes could ever
// hold it; the same sched/admission call as POST /v1/jobs), with
// nothing stored, and notes on what may keep the job pending. A path of
// its own, not a flag on POST /v1/jobs, so that an older schedd answers
// 404/405 rather than submit the job.
func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	if !decode(w, r, &req) {
		return
	}
	asCaller(r.Context(), &req)
	v := s.st.Snapshot()
	j, err := s.admit(v, req, nil)
	if err != nil {
		writeErr(w, err)
		return
	}
	n, capacity := s.partitionCapacity(v, j.Partition)
	writeJSON(w, http.StatusOK, 0, api.SubmitCheck{Partition: j.Partition, Account: j.Account, Walltime: j.Walltime,
		Notes: admission.Notes(j, n, capacity)})
}

func (s *Server) handleJobs(w http.ResponseWriter, r *http.Request) {
	q, err := parseJobsQuery(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	v, idx, ok := s.block(w, r)
	if !ok {
		return
	}
	jobs := q.candidates(v)
	if q.array != 0 {
		jobs = arrayElements(v, q.array)
	}
	// The api.JobList is written a job at a time: a backlog of 100,000
	// jobs (bqueue -u all) held as one list and one encoded buffer took
	// hundreds of MB of schedd's memory for each such answer.
	w.Header().Set("Content-Type", "application/json")
	if idx > 0 {
		w.Header().Set(api.IndexHeader, strconv.FormatUint(idx, 10))
	}
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	_, _ = bw.WriteString(`{"jobs":[`)
	n := 0
	for _, j := range jobs {
		if !q.match(j) {
			continue
		}
		if q.limit > 0 && n == q.limit {
			break
		}
		b, err := json.Marshal(visible(r.Context(), s.view(v, j)))
		if err != nil {
			s.log.Error("encoding a job for GET /v1/jobs", "job", j.ID, "err", err)
			return // the answer ends short: the client sees it is not JSON
		}
		if n > 0 {
			_ = bw.WriteByte(',')
		}
		_, _ = bw.Write(b)
		n++
	}
	_, _ = fmt.Fprintf(bw, "],\"index\":%d}\n", idx)
	_ = bw.Flush()
}

// arrayElements are the elements of job array id in index order, as
// answers show them (state.Snapshot.ElementView); none when id is not
// an array.
func arrayElements(v *state.Snapshot, id uint64) []*state.Job {
	p := v.Job(id)
	if p == nil || p.Array == nil {
		return nil
	}
	var out []*state.Job
	for pos := range p.Array.Count {
		if e, ok := v.ElementView(p, p.Array.Indices.At(pos)); ok {
			out = append(out, e)
		}
	}
	return out
}

func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) {
	ref, ok := jobRef(w, r)
	if !ok {
		return
	}
	v, idx, ok := s.block(w, r)
	if !ok {
		return
	}
	j := v.Job(ref.ID)
	if j != nil && ref.Element {
		if j.Array == nil {
			writeErr(w, fmt.Errorf("job %s: job %d is not a job array: %w", ref, ref.ID, state.ErrNotFound))
			return
		}
		j, _ = v.ElementView(j, ref.Index)
	}
	if j == nil {
		writeErr(w, fmt.Errorf("job %s: %w", ref, state.ErrNotFound))
		return
	}
	writeJSON(w, http.StatusOK, idx, visible(r.Context(), s.view(v, j)))
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("done") == "true" { // bkill -d
		s.handleControl(s.control(state.CmdKill, true))(w, r)
		return
	}
	s.handleControl(s.control(state.CmdKill, false))(w, r)
}

// handleControl serves POST /v1/jobs/{id}/kill, hold and release: the
// job's owner or an admin may; the answer is the job. {id} may name a
// whole job array ("12") or one element ("12[5]").
func (s *Server) handleControl(do func(context.Context, api.JobRef) (*state.Job, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ref, ok := jobRef(w, r)
		if !ok {
			return
		}
		if j := s.st.Snapshot().Job(ref.ID); j != nil {
			if err := mayControl(r.Context(), j); err != nil {
				writeErr(w, err)
				return
			}
		}
		j, err := do(r.Context(), ref)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, 0, jobView(j, jobExtras{}))
	}
}

func (s *Server) handleNodes(w http.ResponseWriter, r *http.Request) {
	v, idx, ok := s.block(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, idx, api.NodeList{Nodes: s.NodeView(v), Index: idx})
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	var reg api.NodeRegister
	if !decode(w, r, &reg) {
		return
	}
	id, ok := caller(r.Context())
	switch {
	case !ok || id.Admin || id.Join:
	case id.Node != "" && id.Node == reg.Name:
	default:
		writeErr(w, fmt.Errorf("%w: registering node %q needs the cluster's join token, that node's credential, or an administrator; you are %s",
			ErrForbidden, reg.Name, id.User))
		return
	}
	n, err := s.Register(r.Context(), reg)
	if err != nil {
		writeErr(w, err)
		return
	}
	view := nodeView(n)
	if ok && id.Join {
		if view.Credential, err = s.nodeCredential(r.Context(), reg.Name); err != nil {
			writeErr(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, 0, api.NodeRegistered{Node: view, NodeLease: Lease(s.cfg.NodeTimeout)})
}

func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.st.Snapshot().Node(name) == nil {
		writeErr(w, fmt.Errorf("node %q: %w; register first", name, state.ErrNotFound))
		return
	}
	var hb api.NodeHeartbeat
	if r.ContentLength != 0 && !decode(w, r, &hb) {
		return
	}
	if err := s.HeartbeatFrom(r.Context(), name, hb.Instance); err != nil {
		writeErr(w, err)
		return
	}
	// Only the leader answers here (redirectToLeader): the lease comes
	// from the server that counts the node's silence.
	writeJSON(w, http.StatusOK, 0, Lease(s.cfg.NodeTimeout))
}

func (s *Server) handleAssignments(w http.ResponseWriter, r *http.Request) {
	if s.st.Snapshot().Node(r.PathValue("name")) != nil {
		if err := s.Heartbeat(r.Context(), r.PathValue("name")); err != nil {
			writeErr(w, err)
			return
		}
	}
	name := r.PathValue("name")
	v, idx, ok := s.blockOn(w, r, func(v *state.Snapshot) (uint64, memdb.WatchSet) {
		if s.assignWoke != nil {
			defer s.assignWoke(name)
		}
		return v.NodeIndex(name)
	})
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, idx, api.Assignments{Assignments: Assignments(v, name), Index: idx})
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	var rep api.ContainerReport
	if !decode(w, r, &rep) {
		return
	}
	if err := s.Report(r.Context(), r.PathValue("name"), rep); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, struct{}{})
}

func (s *Server) handlePartitions(w http.ResponseWriter, r *http.Request) {
	v, idx, ok := s.block(w, r)
	if !ok {
		return
	}
	list := Partitions(v, s.nodes.empty(v))
	list.Index = idx
	list.MaxJobInput, list.MaxQueuedPerUser = s.cfg.MaxJobInput, max(s.cfg.MaxQueuedPerUser, 0)
	writeJSON(w, http.StatusOK, idx, list)
}

func (s *Server) handleFairShare(w http.ResponseWriter, r *http.Request) {
	v, idx, ok := s.block(w, r)
	if !ok {
		return
	}
	list := FairShare(v)
	list.Index = idx
	writeJSON(w, http.StatusOK, idx, list)
}

func (s *Server) handleReconfig(w http.ResponseWriter, r *http.Request) {
	var body struct{}
	if r.ContentLength != 0 && !decode(w, r, &body) {
		return
	}
	res, err := s.Reconfig(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, res)
}

// block serves a blocking query: with ?index=N it waits (up to ?wait=,
// default 30s, at most 5m) until the state index passes N, then returns a
// snapshot. Without index it returns at once.
func (s *Server) block(w http.ResponseWriter, r *http.Request) (*state.Snapshot, uint64, bool) {
	return s.blockOn(w, r, (*state.Snapshot).Index)
}

// blockOn is block on the index that index reads from a snapshot, waking
// only when its watch set fires: a node's assignments wait on that
// node's jobs alone (state.Snapshot.NodeIndex).
func (s *Server) blockOn(w http.ResponseWriter, r *http.Request, index func(*state.Snapshot) (uint64, memdb.WatchSet)) (*state.Snapshot, uint64, bool) {
	q := r.URL.Query()
	var min uint64
	if v := q.Get("index"); v != "" {
		var err error
		if min, err = strconv.ParseUint(v, 10, 64); err != nil {
			writeErr(w, fmt.Errorf("%w: index %q is not a number", ErrInvalid, v))
			return nil, 0, false
		}
	}
	wait := defaultWait
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeErr(w, fmt.Errorf("%w: wait %q is not a duration such as 30s", ErrInvalid, v))
			return nil, 0, false
		}
		wait = min64(d, maxWait)
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	for {
		v := s.st.Snapshot()
		idx, ws := index(v)
		if min == 0 || idx > min || ws.WatchCtx(ctx) != nil {
			return v, idx, true
		}
	}
}

func min64(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// jobRef reads the path's job: "12", or an element of a job array,
// "12[5]".
func jobRef(w http.ResponseWriter, r *http.Request) (api.JobRef, bool) {
	ref, err := api.ParseJobRef(r.PathValue("id"))
	if err != nil {
		writeErr(w, fmt.Errorf("%w: %v", ErrInvalid, err))
		return ref, false
	}
	return ref, true
}

// jobID is the id of the job row the path names: an element "12[5]" is
// its row's id, which it has once it came up (see state's arrays).
func (s *Server) jobID(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	ref, ok := jobRef(w, r)
	if !ok || !ref.Element {
		return ref.ID, ok
	}
	if e := s.st.Snapshot().Element(ref.ID, ref.Index); e != nil {
		return e.ID, true
	}
	writeErr(w, fmt.Errorf("job %s: %w (an element that has not come up yet, has ended and been purged, or does not exist)", ref, state.ErrNotFound))
	return 0, false
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, fmt.Errorf("%w: request body: %v", ErrInvalid, err))
		return false
	}
	return true
}

func writeErr(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrQueueFull): // before ErrInvalid, which it wraps
		code = http.StatusTooManyRequests
	case errors.Is(err, ErrInvalid):
		code = http.StatusBadRequest
	case errors.Is(err, ErrUnauthenticated):
		code = http.StatusUnauthorized
	case errors.Is(err, ErrForbidden):
		code = http.StatusForbidden
	case errors.Is(err, state.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, state.ErrEnded), errors.Is(err, state.ErrConflict):
		code = http.StatusConflict
	case errors.Is(err, errUnavailable):
		code = http.StatusGatewayTimeout
	case errors.Is(err, raftlog.ErrDiskFull):
		code = http.StatusInsufficientStorage
	case errors.Is(err, raftlog.ErrNotLeader):
		// Not applied: the write never entered the log; an election.
		code = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
		w.Header().Set(api.OutcomeHeader, api.OutcomeNotApplied)
	case errors.Is(err, raftlog.ErrUnknownOutcome):
		// The entry may still commit under the next leader: clients send
		// the same request id again (idempotent), never a new request.
		code = http.StatusGatewayTimeout
		w.Header().Set(api.OutcomeHeader, api.OutcomeUnknown)
	}
	body := api.Error{Error: err.Error()}
	if r := (*admission.Refusal)(nil); errors.As(err, &r) {
		body.Problems = r.API()
	}
	writeJSON(w, code, 0, body)
}

func writeJSON(w http.ResponseWriter, code int, idx uint64, v any) {
	w.Header().Set("Content-Type", "application/json")
	if idx > 0 {
		w.Header().Set(api.IndexHeader, strconv.FormatUint(idx, 10))
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) handleSnapshotSave(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	if err := s.SaveSnapshot(&buf); err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = buf.WriteTo(w)
}

func (s *Server) handleSnapshotRestore(w http.ResponseWriter, r *http.Request) {
	d, err := s.RestoreSnapshot(r.Context(), http.MaxBytesReader(w, r.Body, maxSnapshot+4096))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, api.SnapshotRestored{Jobs: len(d.Jobs), Nodes: len(d.Nodes)})
}
