package sched

import (
	"iter"
	"slices"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/httpapi"
	"github.com/troupe-hpc/troupe/sched/state"
)

// GET /v1/jobs's filters (httpapi.JobsQuery, which bqueue sets) picked
// on the rows, so that the answer does not grow with every job in the
// state.

// matchJob reports whether j passes q's filters other than After and
// Limit.
func matchJob(q *httpapi.JobsQuery, j *state.Job) bool {
	return matchFields(q, j.ID, j.User, j.Partition, j.State)
}

// matchFields is matchJob on the fields it reads, for a job the state
// no longer holds.
func matchFields(q *httpapi.JobsQuery, id uint64, user, partition string, st api.JobState) bool {
	if q.NoEnded && st.Terminal() && !slices.Contains(q.States, st) {
		return false
	}
	return (q.After == 0 || id > q.After) &&
		(len(q.Users) == 0 || slices.Contains(q.Users, user)) &&
		(len(q.Partitions) == 0 || slices.Contains(q.Partitions, partition)) &&
		(len(q.States) == 0 || slices.Contains(q.States, st))
}

// candidates are the jobs q's filters pick from, in id order, read by
// the smallest index that holds every match: the state index when the
// states asked for are live ones (a queue's few against the many ended
// jobs not yet purged), else the user index, else the state index, else
// the live jobs (ended=false), else every job. They are read off the
// snapshot as the answer is written, never gathered in a list.
func candidates(v *state.Snapshot, q *httpapi.JobsQuery) iter.Seq[*state.Job] {
	states := slices.Compact(slices.Sorted(slices.Values(q.States)))
	live := len(states) > 0 && !slices.ContainsFunc(states, api.JobState.Terminal)
	switch {
	case live:
		return v.EachJobIn(states...)
	case len(q.Users) > 0:
		return v.EachJobOf(slices.Compact(slices.Sorted(slices.Values(q.Users)))...)
	case len(q.States) > 0:
		return v.EachJobIn(states...)
	case q.NoEnded:
		return v.EachLiveJob()
	}
	return v.EachJob()
}
