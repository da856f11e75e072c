package sched

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// HistoryQuery chooses the ended jobs GET /v1/history returns (bhist).
type HistoryQuery struct {
	Users []string // none: every user's
	// SubmittedFrom/To and EndedFrom/To bound the submit and end times
	// (zero: unbounded), inclusive.
	SubmittedFrom, SubmittedTo time.Time
	EndedFrom, EndedTo         time.Time
	Limit                      int // the last Limit jobs by end time; 0 all
}

// parseHistoryQuery reads ?user=U (repeatable), submitted_from,
// submitted_to, ended_from, ended_to (RFC 3339) and limit.
func parseHistoryQuery(q url.Values) (HistoryQuery, error) {
	h := HistoryQuery{Users: q["user"]}
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

func within(t, from, to time.Time) bool {
	return (from.IsZero() || !t.Before(from)) && (to.IsZero() || !t.After(to))
}

// History picks the ended jobs q asks for, oldest end first, as records.
func History(jobs []api.Job, q HistoryQuery) []api.HistoryJob {
	out := []api.HistoryJob{}
	for _, j := range jobs {
		if !j.State.Terminal() ||
			(len(q.Users) > 0 && !slices.Contains(q.Users, j.User)) ||
			!within(j.Submitted, q.SubmittedFrom, q.SubmittedTo) ||
			!within(j.Ended, q.EndedFrom, q.EndedTo) {
			continue
		}
		out = append(out, HistoryRecord(j))
	}
	slices.SortStableFunc(out, func(a, b api.HistoryJob) int {
		if c := a.Ended.Compare(b.Ended); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[len(out)-q.Limit:]
	}
	return out
}

// HistoryRecord is an ended job's record: times, usage, nodes and its
// timeline.
func HistoryRecord(j api.Job) api.HistoryJob {
	h := api.HistoryJob{
		ID: j.ID, Name: j.Name, User: j.User, Partition: j.Partition, State: j.State, Reason: j.Reason,
		ExitCode: j.ExitCode, Submitted: j.Submitted, Started: j.Started, Ended: j.Ended,
		CPUTime: j.CPUTime, MemPeak: j.MemPeak, Nodes: []string{},
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
	d := fmt.Sprintf("%s, exit code %d", j.State, j.ExitCode)
	if j.Reason != "" {
		d += ": " + j.Reason
	}
	h.Events = append(h.Events, api.JobEvent{Time: j.Ended, Event: api.EventEnded, Detail: d})
	return h
}

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
	var jobs []api.Job
	for _, j := range v.Jobs() {
		if j.State.Terminal() {
			jobs = append(jobs, visible(r.Context(), *j))
		}
	}
	writeJSON(w, http.StatusOK, idx, api.History{Jobs: History(jobs, q), Index: idx})
}

// Signal records a bkill -s request (see state.CmdSignal).
func (s *Server) Signal(ctx context.Context, id uint64, req api.SignalJob) (*api.Job, error) {
	sig, err := api.ParseSignal(req.Signal)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	v, err := s.apply(ctx, state.Command{Kind: state.CmdSignal, Signal: &state.Signal{JobID: id, Signal: int(sig), Host: req.Host}})
	if err != nil {
		return nil, err
	}
	s.wake()
	return v.(*api.Job), nil
}

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request) {
	id, ok := jobID(w, r)
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
	writeJSON(w, http.StatusOK, 0, j)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
