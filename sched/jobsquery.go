package sched

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// jobsQuery is GET /v1/jobs's filters: what bqueue shows, picked on the
// server so that the answer does not grow with every job in the state.
type jobsQuery struct {
	users, partitions []string
	states            []api.JobState
	noEnded           bool   // ended=false: leave ended jobs out (unless states names one)
	after             uint64 // only ids above (pagination)
	limit             int    // at most this many, in id order; 0 all
	// array: list the elements of this job array, in index order, those
	// without a row yet too (bqueue -A); the other filters apply.
	array uint64
}

// queryStates are the states ?state= takes.
var queryStates = []api.JobState{api.JobPending, api.JobHeld, api.JobScheduled, api.JobPreparing, api.JobRunning,
	api.JobCompleted, api.JobFailed, api.JobCancelled, api.JobTimeout, api.JobNodeFail}

// parseJobsQuery reads ?user=U, partition=P, state=S (each repeatable),
// ended=false, after=ID, array=ID and limit=N.
func parseJobsQuery(q url.Values) (jobsQuery, error) {
	jq := jobsQuery{users: q["user"], partitions: q["partition"]}
	for _, s := range q["state"] {
		st := api.JobState(strings.ToUpper(s))
		if !slices.Contains(queryStates, st) {
			return jq, fmt.Errorf("%w: state %q is not a job state", ErrInvalid, s)
		}
		jq.states = append(jq.states, st)
	}
	switch v := q.Get("ended"); v {
	case "", "true":
	case "false":
		jq.noEnded = true
	default:
		return jq, fmt.Errorf("%w: ended %q: want true or false", ErrInvalid, v)
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return jq, fmt.Errorf("%w: after %q is not a job id", ErrInvalid, v)
		}
		jq.after = n
	}
	if v := q.Get("array"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return jq, fmt.Errorf("%w: array %q is not a job id", ErrInvalid, v)
		}
		jq.array = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return jq, fmt.Errorf("%w: limit %q is not a number ≥ 0", ErrInvalid, v)
		}
		jq.limit = n
	}
	return jq, nil
}

// match reports whether j passes the filters other than after and limit.
func (q jobsQuery) match(j *state.Job) bool {
	if q.noEnded && j.State.Terminal() && !slices.Contains(q.states, j.State) {
		return false
	}
	return (q.after == 0 || j.ID > q.after) &&
		(len(q.users) == 0 || slices.Contains(q.users, j.User)) &&
		(len(q.partitions) == 0 || slices.Contains(q.partitions, j.Partition)) &&
		(len(q.states) == 0 || slices.Contains(q.states, j.State))
}

// candidates are the jobs the filters pick from, in id order, read by
// the smallest index that holds every match: the state index when the
// states asked for are live ones (a queue's few against the many ended
// jobs not yet purged), else the user index, else the state index, else
// the live jobs (ended=false), else every job.
func (q jobsQuery) candidates(v *state.Snapshot) []*state.Job {
	states := slices.Compact(slices.Sorted(slices.Values(q.states)))
	live := len(states) > 0 && !slices.ContainsFunc(states, api.JobState.Terminal)
	switch {
	case live:
		return v.JobsIn(states...)
	case len(q.users) > 0:
		var out []*state.Job
		for _, u := range slices.Compact(slices.Sorted(slices.Values(q.users))) {
			out = append(out, v.JobsOf(u)...)
		}
		if len(q.users) > 1 {
			slices.SortFunc(out, func(a, b *state.Job) int { return cmp.Compare(a.ID, b.ID) })
		}
		return out
	case len(q.states) > 0:
		return v.JobsIn(states...)
	case q.noEnded:
		return v.LiveJobs()
	}
	return v.Jobs()
}
