package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/accounting"
	"github.com/troupe-hpc/troupe/sched/state"
)

// HistoryQuery chooses the ended jobs GET /v1/history returns (bhist)
// and GET /v1/accounting sums (bacct): the store's filter.
type HistoryQuery = accounting.Filter

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
	h.Events = append(h.Events, api.JobEvent{Time: j.Ended, Event: api.EventEnded, Detail: api.EndedDetail(j.State, j.ExitCode, j.Reason)})
	return h
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

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
