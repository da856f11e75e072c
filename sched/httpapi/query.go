package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/fault"
)

const (
	defaultWait = 30 * time.Second
	maxWait     = 5 * time.Minute
)

// JobsQuery is GET /v1/jobs's filters: what bqueue shows, picked on the
// server so that the answer does not grow with every job in the state.
type JobsQuery struct {
	Users, Partitions []string
	States            []api.JobState
	NoEnded           bool   // ended=false: leave ended jobs out (unless States names one)
	After             uint64 // only ids above (pagination)
	Limit             int    // at most this many, in id order; 0 all
	// Array: list the elements of this job array, in index order, those
	// without a row yet too (bqueue -A); the other filters apply.
	Array uint64
}

// QueryStates are the states ?state= takes.
var QueryStates = []api.JobState{api.JobPending, api.JobHeld, api.JobScheduled, api.JobPreparing, api.JobRunning,
	api.JobCompleted, api.JobFailed, api.JobCancelled, api.JobTimeout, api.JobNodeFail, api.JobPreempted}

// parseJobsQuery reads ?user=U, partition=P, state=S (each repeatable),
// ended=false, after=ID, array=ID and limit=N.
func parseJobsQuery(q url.Values) (JobsQuery, error) {
	jq := JobsQuery{Users: q["user"], Partitions: q["partition"]}
	for _, s := range q["state"] {
		st := api.JobState(strings.ToUpper(s))
		if !slices.Contains(QueryStates, st) {
			return jq, fmt.Errorf("%w: state %q is not a job state", fault.ErrInvalid, s)
		}
		jq.States = append(jq.States, st)
	}
	switch v := q.Get("ended"); v {
	case "", "true":
	case "false":
		jq.NoEnded = true
	default:
		return jq, fmt.Errorf("%w: ended %q: want true or false", fault.ErrInvalid, v)
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return jq, fmt.Errorf("%w: after %q is not a job id", fault.ErrInvalid, v)
		}
		jq.After = n
	}
	if v := q.Get("array"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return jq, fmt.Errorf("%w: array %q is not a job id", fault.ErrInvalid, v)
		}
		jq.Array = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return jq, fmt.Errorf("%w: limit %q is not a number ≥ 0", fault.ErrInvalid, v)
		}
		jq.Limit = n
	}
	return jq, nil
}

// parseHistoryQuery reads ?user=U, account, partition, state, id (each
// repeatable; an id is a job's, or an array element's "12[5]"), submitted_from, submitted_to, ended_from, ended_to (RFC
// 3339) and limit.
func parseHistoryQuery(q url.Values) (api.HistoryFilter, error) {
	h := api.HistoryFilter{Users: q["user"], Accounts: q["account"], Partitions: q["partition"]}
	for _, st := range q["state"] {
		js := api.JobState(strings.ToUpper(st))
		if !js.Terminal() && js != api.JobRequeued {
			return h, fmt.Errorf("%w: state %q is not an end state (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, REQUEUED)", fault.ErrInvalid, st)
		}
		h.States = append(h.States, js)
	}
	for _, v := range q["id"] {
		ref, err := api.ParseJobRef(v)
		if err != nil || ref.ID == 0 {
			return h, fmt.Errorf("%w: id %q is not a job id (12) nor an array element (12[5])", fault.ErrInvalid, v)
		}
		if ref.Element {
			h.Elements = append(h.Elements, ref)
		} else {
			h.IDs = append(h.IDs, ref.ID)
		}
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
				return h, fmt.Errorf("%w: %s %q is not an RFC 3339 time", fault.ErrInvalid, t.name, v)
			}
			*t.to = tm
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return h, fmt.Errorf("%w: limit %q is not a number ≥ 0", fault.ErrInvalid, v)
		}
		h.Limit = n
	}
	return h, nil
}

// parseWait reads a blocking query's ?index=N&wait=D (default 30s, at
// most 5m).
func parseWait(q url.Values) (Wait, error) {
	w := Wait{For: defaultWait}
	if v := q.Get("index"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return w, fmt.Errorf("%w: index %q is not a number", fault.ErrInvalid, v)
		}
		w.Index = n
	}
	d, err := parseDuration(q)
	if err != nil {
		return w, err
	}
	w.For = d
	return w, nil
}

// parseDuration reads ?wait=D: 30s when absent, at most 5m.
func parseDuration(q url.Values) (time.Duration, error) {
	v := q.Get("wait")
	if v == "" {
		return defaultWait, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: wait %q is not a duration such as 30s", fault.ErrInvalid, v)
	}
	return min(d, maxWait), nil
}

// jobRef reads the path's job: "12", or an element of a job array,
// "12[5]".
func jobRef(r *http.Request) (api.JobRef, error) {
	ref, err := api.ParseJobRef(r.PathValue("id"))
	if err != nil {
		return ref, fmt.Errorf("%w: %v", fault.ErrInvalid, err)
	}
	return ref, nil
}
