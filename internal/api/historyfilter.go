package api

import (
	"slices"
	"time"
)

// HistoryFilter chooses ended jobs: the ones GET /v1/history returns
// (bhist, sacct) and GET /v1/accounting sums (bacct), from the
// accounting store and from the ended jobs still in the replicated
// state alike. Empty fields do not filter; times are inclusive.
type HistoryFilter struct {
	// IDs picks jobs by id; the id of a job array picks its elements.
	IDs []uint64
	// Elements picks single elements of job arrays (ID and Index of
	// each, Element set): GET /v1/history?id=12[5]. A record passes when
	// IDs or Elements picks it (either, when both are given).
	Elements   []JobRef
	Users      []string
	Accounts   []string
	Partitions []string
	States     []JobState
	// SubmittedFrom/To and EndedFrom/To bound the submit and end times
	// (zero: unbounded).
	SubmittedFrom, SubmittedTo time.Time
	EndedFrom, EndedTo         time.Time
	Limit                      int // the last Limit jobs by end time; 0 all
}

// Match reports whether h passes f (the accounting store applies f in
// its query; Match is f for records held elsewhere).
func (f *HistoryFilter) Match(h *HistoryJob) bool {
	in := func(t, from, to time.Time) bool {
		return (from.IsZero() || !t.Before(from)) && (to.IsZero() || !t.After(to))
	}
	return f.picks(h) &&
		(len(f.Users) == 0 || slices.Contains(f.Users, h.User)) &&
		(len(f.Accounts) == 0 || slices.Contains(f.Accounts, h.Account)) &&
		(len(f.Partitions) == 0 || slices.Contains(f.Partitions, h.Partition)) &&
		(len(f.States) == 0 || slices.Contains(f.States, h.State)) &&
		in(h.Submitted, f.SubmittedFrom, f.SubmittedTo) && in(h.Ended, f.EndedFrom, f.EndedTo)
}

// picks reports whether f's IDs or Elements name h (true when both are
// empty).
func (f *HistoryFilter) picks(h *HistoryJob) bool {
	if len(f.IDs) == 0 && len(f.Elements) == 0 {
		return true
	}
	if slices.Contains(f.IDs, h.ID) || (h.ArrayID != 0 && slices.Contains(f.IDs, h.ArrayID)) {
		return true
	}
	return h.ArrayID != 0 && slices.Contains(f.Elements, JobRef{ID: h.ArrayID, Index: h.ArrayIndex, Element: true})
}

// JobFromHistory is a job that has left schedd's state, as bjob and a
// job array's listing show it from its record in the accounting store:
// who, where, state, exit code, times, usage and each container's end;
// the spec is not kept there.
func JobFromHistory(h HistoryJob) Job {
	j := Job{ID: h.ID, Name: h.Name, User: h.User, UID: h.UID, Partition: h.Partition, Account: h.Account,
		Requeues: h.Requeues, State: h.State, Reason: h.Reason, ExitCode: h.ExitCode,
		Submitted: h.Submitted, Started: h.Started, Ended: h.Ended, CPUTime: h.CPUTime, MemPeak: h.MemPeak,
		ArrayID: h.ArrayID, ArrayIndex: h.ArrayIndex}
	for _, c := range h.Containers {
		k := Container{Node: c.Node, State: c.State, ExitCode: c.ExitCode,
			Message: c.Message, CPUTime: c.CPUTime, MemPeak: c.MemPeak, Ended: c.Ended}
		k.Host = c.Host
		j.Containers = append(j.Containers, k)
	}
	return j
}
