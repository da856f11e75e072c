package sched

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/accounting"
	"github.com/troupe-hpc/troupe/sched/state"
)

// HistoryQuery chooses the ended jobs GET /v1/history returns (bhist)
// and GET /v1/accounting sums (bacct): the store's filter.
type HistoryQuery = accounting.Filter

// parseHistoryQuery reads ?user=U, account, partition, state, id (each
// repeatable), submitted_from, submitted_to, ended_from, ended_to (RFC
// 3339) and limit.
func parseHistoryQuery(q url.Values) (HistoryQuery, error) {
	h := HistoryQuery{Users: q["user"], Accounts: q["account"], Partitions: q["partition"]}
	for _, st := range q["state"] {
		js := api.JobState(strings.ToUpper(st))
		if !js.Terminal() {
			return h, fmt.Errorf("%w: state %q is not an end state (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL)", ErrInvalid, st)
		}
		h.States = append(h.States, js)
	}
	for _, v := range q["id"] {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil || id == 0 {
			return h, fmt.Errorf("%w: id %q is not a job id", ErrInvalid, v)
		}
		h.IDs = append(h.IDs, id)
	}
	for _, t := range []struct {
		name string
		to   *time.Time
	}{
		{"submitted_from", &h.SubmittedFrom}, {"submitted_to", &h.SubmittedTo},
		{"ended_from", &h.EndedFrom}, {"ended_to", &h.EndedTo},
	} {
		if v := q.Get(t.name); v != "" {
			tm, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return h, fmt.Errorf("%w: %s %q is not an RFC 3339 time", ErrInvalid, t.name, v)
			}
			*t.to = tm
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return h, fmt.Errorf("%w: limit %q is not a number ≥ 0", ErrInvalid, v)
		}
		h.Limit = n
	}
	return h, nil
}

// History picks the ended jobs q asks for, oldest end first, as records.
func History(jobs []api.Job, q HistoryQuery) []api.HistoryJob {
	out := []api.HistoryJob{}
	for _, j := range jobs {
		if !j.State.Terminal() || j.Array != nil { // an array's record is its elements'
			continue
		}
		if h := HistoryRecord(j); q.Match(&h) {
			out = append(out, h)
		}
	}
	return sortHistory(out, q.Limit)
}

// sortHistory orders records by end (ties by id and run) and keeps the
// last limit (0: all).
func sortHistory(out []api.HistoryJob, limit int) []api.HistoryJob {
	slices.SortStableFunc(out, func(a, b api.HistoryJob) int {
		if c := a.Ended.Compare(b.Ended); c != 0 {
			return c
		}
		if c := cmp.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return cmp.Compare(a.Requeues, b.Requeues)
	})
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// HistoryRecord is an ended job's record: times, usage, nodes and its
// timeline.
func HistoryRecord(j api.Job) api.HistoryJob {
	h := api.HistoryJob{
		ID: j.ID, Name: j.Name, User: j.User, UID: j.UID, Partition: j.Partition, Account: j.Account, Requeues: j.Requeues,
		State: j.State, Reason: j.Reason,
		ExitCode: j.ExitCode, Submitted: j.Submitted, Started: j.Started, Ended: j.Ended,
		CPUTime: j.CPUTime, MemPeak: j.MemPeak, Nodes: []string{},
		ArrayID: j.ArrayID, ArrayIndex: j.ArrayIndex,
	}
	if j.Started.IsZero() {
		h.Wait = j.Ended.Sub(j.Submitted)
	} else {
		h.Wait, h.Run = j.Started.Sub(j.Submitted), j.Ended.Sub(j.Started)
	}
	for _, c := range j.Containers {
		if c.Node != "" && !slices.Contains(h.Nodes, c.Node) {
			h.Nodes = append(h.Nodes, c.Node)
		}
		h.GPUs += c.Resources.GPU
		h.Containers = append(h.Containers, api.HistoryContainer{Host: c.Host, Node: c.Node, State: c.State,
			ExitCode: c.ExitCode, Message: c.Message, CPUTime: c.CPUTime, MemPeak: c.MemPeak})
	}
	h.Events = append(h.Events, api.JobEvent{Time: j.Submitted, Event: api.EventSubmitted,
		Detail: fmt.Sprintf("to partition %s, %d container%s", j.Partition, len(j.Containers), plural(len(j.Containers)))})
	if !j.Started.IsZero() {
		h.Events = append(h.Events, api.JobEvent{Time: j.Started, Event: api.EventStarted, Detail: "on " + strings.Join(h.Nodes, ", ")})
	}
	for _, s := range j.Signals {
		d := "SIG" + api.SignalName(s.Signal) + " to all containers"
		if s.Host != "" {
			d = "SIG" + api.SignalName(s.Signal) + " to " + s.Host
		}
		h.Events = append(h.Events, api.JobEvent{Time: s.Time, Event: api.EventSignalled, Detail: d})
	}
	h.Events = append(h.Events, api.JobEvent{Time: j.Ended, Event: api.EventEnded, Detail: endedDetail(j.State, j.ExitCode, j.Reason)})
	return h
}

// handleHistory answers bhist from the accounting store and the ended
// jobs still in the replicated state, each run once.
func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) {
	q, err := parseHistoryQuery(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	v, idx, ok := s.block(w, r)
	if !ok {
		return
	}
	live := History(endedJobs(v), q)
	stored, err := s.acct.Query(r.Context(), q)
	if err != nil {
		writeErr(w, err)
		return
	}
	seen := map[accounting.Key]bool{}
	out := make([]api.HistoryJob, 0, len(live)+len(stored))
	for i := range live {
		seen[accounting.KeyOf(&live[i])] = true
		out = append(out, live[i])
	}
	for i := range stored {
		if !seen[accounting.KeyOf(&stored[i])] {
			out = append(out, stored[i])
		}
	}
	out = sortHistory(out, q.Limit)
	for i := range out {
		out[i] = visibleHistory(r.Context(), out[i])
	}
	writeJSON(w, http.StatusOK, idx, api.History{Jobs: out, Index: idx})
}

// endedJobs are the ended jobs in v, as views.
func endedJobs(v *state.Snapshot) []api.Job {
	var jobs []api.Job
	for _, j := range v.Jobs() {
		if j.State.Terminal() {
			jobs = append(jobs, jobView(j, jobExtras{}))
		}
	}
	return jobs
}

// visibleHistory is h as the caller may see it: whole for its owner and
// admins, else what HistoryRecord makes of the job's Public view.
func visibleHistory(ctx context.Context, h api.HistoryJob) api.HistoryJob {
	id, ok := caller(ctx)
	if !ok || id.Admin || (id.UID >= 0 && id.UID == h.UID) {
		return h
	}
	return PublicHistory(h)
}

// PublicHistory is h as others see it (api.Job.Public): no signals, the
// public reason, no container messages.
func PublicHistory(h api.HistoryJob) api.HistoryJob {
	p := h
	p.Reason = api.PublicReason(h.Reason)
	p.Events = nil
	for _, e := range h.Events {
		switch e.Event {
		case api.EventSignalled:
			continue
		case api.EventEnded:
			e.Detail = endedDetail(h.State, h.ExitCode, p.Reason)
		}
		p.Events = append(p.Events, e)
	}
	p.Containers = slices.Clone(h.Containers)
	for i := range p.Containers {
		p.Containers[i].Message = ""
	}
	return p
}

func endedDetail(st api.JobState, code int, reason string) string {
	d := fmt.Sprintf("%s, exit code %d", st, code)
	if reason != "" {
		d += ": " + reason
	}
	return d
}

// handleAccounting answers bacct: the ended jobs the query picks (store
// and state, each run once) summed per ?group=user|account|partition.
func (s *Server) handleAccounting(w http.ResponseWriter, r *http.Request) {
	q, err := parseHistoryQuery(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	group := r.URL.Query().Get("group")
	if group == "" {
		group = "user"
	}
	rows, err := s.acct.Summary(r.Context(), q, group)
	if err != nil {
		if errors.Is(err, accounting.ErrInvalid) {
			err = fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		writeErr(w, err)
		return
	}
	live := History(endedJobs(s.st.Snapshot()), q)
	keys := make([]accounting.Key, len(live))
	for i := range live {
		keys[i] = accounting.KeyOf(&live[i])
	}
	has, err := s.acct.Has(r.Context(), keys)
	if err != nil {
		writeErr(w, err)
		return
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
	writeJSON(w, http.StatusOK, 0, res)
}

// Signal records a bkill -s request (see state.CmdSignal).
func (s *Server) Signal(ctx context.Context, id uint64, req api.SignalJob) (*state.Job, error) {
	sig, err := api.ParseSignal(req.Signal)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	v, err := s.apply(ctx, state.Command{Kind: state.CmdSignal, Signal: &state.Signal{JobID: id, Signal: int(sig), Host: req.Host}})
	if err != nil {
		return nil, err
	}
	s.wake()
	return v.(*state.Job), nil
}

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request) {
	id, ok := s.jobID(w, r)
	if !ok {
		return
	}
	var req api.SignalJob
	if !decode(w, r, &req) {
		return
	}
	if j := s.st.Snapshot().Job(id); j != nil {
		if err := mayControl(r.Context(), j); err != nil {
			writeErr(w, err)
			return
		}
	}
	j, err := s.Signal(r.Context(), id, req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, 0, jobView(j, jobExtras{}))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
