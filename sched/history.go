package sched

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/state"
)

// History picks the records q asks for among recs, oldest end first.
func History(recs []api.HistoryJob, q api.HistoryFilter) []api.HistoryJob {
	out := []api.HistoryJob{}
	for i := range recs {
		if q.Match(&recs[i]) {
			out = append(out, recs[i])
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

// HistoryRecord is the record of an ended job's last run: times, usage,
// nodes and its timeline.
func HistoryRecord(j api.Job) api.HistoryJob { return runRecord(j, j.Submitted, "") }

// RunRecords are the records of j's ended runs, oldest first: one for
// each run a requeue ended (REQUEUED, keyed by the job's id and that
// run), whether or not j has ended since, then its last run's once it
// has. An array's own row has none (its elements are the jobs).
func RunRecords(j *state.Job) []api.HistoryJob {
	if j.Array != nil || (len(j.Runs) == 0 && !j.State.Terminal()) {
		return nil
	}
	view := jobView(j, jobExtras{})
	var out []api.HistoryJob
	begin, why := j.Submitted, ""
	for i, r := range j.Runs {
		out = append(out, runRecord(pastRun(view, i, runView(r)), begin, why))
		begin, why = r.Ended, r.Reason
	}
	if j.State.Terminal() {
		if len(j.Runs) != j.Requeues {
			// The run before the last was not kept (requeued under an
			// older schema): its requeue's time is unknown.
			begin, why = j.Submitted, j.LastRequeue
		}
		out = append(out, runRecord(view, begin, why))
	}
	return out
}

// pastRun is j's view as its run i (r) ended: that run's times, exit
// code, usage and containers, in state REQUEUED.
func pastRun(j api.Job, i int, r api.JobRun) api.Job {
	p := j
	p.Requeues, p.State, p.Reason, p.ExitCode = i, api.JobRequeued, r.Reason, r.ExitCode
	p.Started, p.Ended, p.CPUTime, p.MemPeak = r.Started, r.Ended, r.CPUTime, r.MemPeak
	p.Containers = slices.Clone(j.Containers)
	for k := range p.Containers {
		c := &p.Containers[k]
		c.Node, c.NodeAddr, c.GPUs, c.State, c.ExitCode, c.Message, c.CPUTime, c.MemPeak, c.Ended = "", "", nil, api.ContainerPending, 0, "", 0, 0, time.Time{}
		if k < len(r.Containers) && r.Containers[k].Host == c.Host {
			h := r.Containers[k]
			c.Node, c.State, c.ExitCode, c.Message, c.CPUTime, c.MemPeak, c.Ended = h.Node, h.State, h.ExitCode, h.Message, h.CPUTime, h.MemPeak, h.Ended
		}
	}
	return p
}

// runRecord is the record of j's run j.Requeues, which began at begin
// (the submission, or the requeue that ended the run before, why).
func runRecord(j api.Job, begin time.Time, why string) api.HistoryJob {
	h := api.HistoryJob{
		ID: j.ID, Name: j.Name, User: j.User, UID: j.UID, Partition: j.Partition, Account: j.Account, Requeues: j.Requeues,
		State: j.State, Reason: j.Reason,
		ExitCode: j.ExitCode, Submitted: j.Submitted, Started: j.Started, Ended: j.Ended,
		CPUTime: j.CPUTime, MemPeak: j.MemPeak, Nodes: []string{},
		ArrayID: j.ArrayID, ArrayIndex: j.ArrayIndex,
	}
	if j.Started.IsZero() {
		h.Wait = j.Ended.Sub(begin)
	} else {
		h.Wait, h.Run = j.Started.Sub(begin), j.Ended.Sub(j.Started)
	}
	for _, c := range j.Containers {
		if c.Node != "" && !slices.Contains(h.Nodes, c.Node) {
			h.Nodes = append(h.Nodes, c.Node)
		}
		h.GPUs += c.Resources.GPU
		h.Containers = append(h.Containers, api.HistoryContainer{Host: c.Host, Node: c.Node, State: c.State,
			ExitCode: c.ExitCode, Message: c.Message, CPUTime: c.CPUTime, MemPeak: c.MemPeak, Ended: c.Ended})
	}
	if j.Requeues == 0 {
		h.Events = append(h.Events, api.JobEvent{Time: j.Submitted, Event: api.EventSubmitted,
			Detail: fmt.Sprintf("to partition %s, %d container%s", j.Partition, len(j.Containers), plural(len(j.Containers)))})
	} else {
		h.Events = append(h.Events, api.JobEvent{Time: begin, Event: api.EventRequeued,
			Detail: fmt.Sprintf("run %d: %s", j.Requeues+1, why)})
	}
	if !j.Started.IsZero() {
		h.Events = append(h.Events, api.JobEvent{Time: j.Started, Event: api.EventStarted, Detail: "on " + strings.Join(h.Nodes, ", ")})
	}
	for _, s := range j.Signals {
		// A run's signals are those sent from its begin to the requeue
		// that ended it; the last run's, all from its begin (none is
		// taken once the job has ended). Its end as the node measured
		// it may come a little before a signal's commit, never bound
		// the last run by it.
		if s.Time.Before(begin) || (j.State == api.JobRequeued && s.Time.After(j.Ended)) {
			continue // another run's
		}
		d := "SIG" + api.SignalName(s.Signal) + " to all containers"
		if s.Host != "" {
			d = "SIG" + api.SignalName(s.Signal) + " to " + s.Host
		}
		h.Events = append(h.Events, api.JobEvent{Time: s.Time, Event: api.EventSignalled, Detail: d})
	}
	if j.State == api.JobRequeued {
		h.Events = append(h.Events, api.JobEvent{Time: j.Ended, Event: api.EventRequeued, Detail: j.Reason})
	} else {
		h.Events = append(h.Events, api.JobEvent{Time: j.Ended, Event: api.EventEnded, Detail: api.EndedDetail(j.State, j.ExitCode, j.Reason)})
	}
	return h
}

// liveRun is one ended run of a job in the state that a history query
// picks: the row and which of its RunRecords, with the keys its record
// is ordered by. A query holds these, not the records, which are made
// again as the answer is written.
type liveRun struct {
	j     *state.Job
	run   int // index in RunRecords(j)
	ended time.Time
	id    uint64
	reqs  int
}

func (r liveRun) record() api.HistoryJob { return RunRecords(r.j)[r.run] }

// compareRun orders history records by end, then id, then run: the
// order of every history answer.
func compareRun(ended time.Time, id uint64, run int, ended2 time.Time, id2 uint64, run2 int) int {
	if c := ended.Compare(ended2); c != 0 {
		return c
	}
	if c := cmp.Compare(id, id2); c != 0 {
		return c
	}
	return cmp.Compare(run, run2)
}

// historyRows are the rows of v a history query q may pick records of,
// read by the narrowest index: the jobs and elements q names (an array's
// id: its elements), else the jobs of q's users, else every job.
func historyRows(v *state.Snapshot, q *api.HistoryFilter) iter.Seq[*state.Job] {
	switch {
	case len(q.IDs) > 0 || len(q.Elements) > 0:
		return func(yield func(*state.Job) bool) {
			seen := map[uint64]bool{}
			one := func(j *state.Job) bool {
				if j == nil || seen[j.ID] {
					return true
				}
				seen[j.ID] = true
				return yield(j)
			}
			for _, id := range q.IDs {
				if !one(v.Job(id)) {
					return
				}
				for e := range v.EachElementOf(id) {
					if !one(e) {
						return
					}
				}
			}
			for _, e := range q.Elements {
				if !one(v.Element(e.ID, e.Index)) {
					return
				}
			}
		}
	case len(q.Users) > 0:
		return v.EachJobOf(slices.Compact(slices.Sorted(slices.Values(q.Users)))...)
	}
	return v.EachJob()
}

// liveRuns are the ended runs in v that q picks, in the order of the
// answer (compareRun), the last q.Limit of them when it is set.
func liveRuns(v *state.Snapshot, q *api.HistoryFilter) []liveRun {
	var out []liveRun
	for j := range historyRows(v, q) {
		for i, h := range RunRecords(j) {
			if q.Match(&h) {
				out = append(out, liveRun{j: j, run: i, ended: h.Ended, id: h.ID, reqs: h.Requeues})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b liveRun) int { return compareRun(a.ended, a.id, a.reqs, b.ended, b.id, b.reqs) })
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[len(out)-q.Limit:]
	}
	return out
}

// stateHistory are the records of the ended runs in v that q picks,
// oldest end first (the last q.Limit).
func stateHistory(v *state.Snapshot, q api.HistoryFilter) []api.HistoryJob {
	runs := liveRuns(v, &q)
	out := make([]api.HistoryJob, len(runs))
	for i, r := range runs {
		out[i] = r.record()
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
