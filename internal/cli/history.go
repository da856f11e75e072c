package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/troupe-hpc/troupe/internal/api"
)

// HistoryHeader are the columns of bhist.
var HistoryHeader = []string{"JOBID", "USER", "NAME", "PARTITION", "STATE", "EXIT", "SUBMITTED", "WAIT", "RUN", "CPU_TIME", "MAX_MEM", "NODES"}

// WriteHistory writes ended jobs as bhist's table, in the order given
// (schedd's: oldest end first); times in loc.
func WriteHistory(w io.Writer, jobs []api.HistoryJob, loc *time.Location) error {
	t := NewTable(w, HistoryHeader...)
	for _, j := range jobs {
		t.Row(j.Ref(), j.User, j.Name, j.Partition, string(j.State), cell(HistoryExitCode(j)),
			Timestamp(j.Submitted, loc), Elapsed(j.Wait), Elapsed(j.Run), CPUTime(j.CPUTime), Memory(j.MemPeak),
			strings.Join(j.Nodes, ","))
	}
	return t.Flush()
}

// HistoryFromJob is an unfinished job's current run as bhist shows it at
// now: its wait (to its start, or until now, from the submission or from
// the requeue that ended the run before), its run so far, its timeline
// until now. A requeued job's earlier runs are records of their own in
// the accounting store.
func HistoryFromJob(j api.Job, now time.Time) api.HistoryJob {
	h := api.HistoryJob{ID: j.ID, Name: j.Name, User: j.User, UID: j.UID, Partition: j.Partition,
		Account: JobAccount(j), Requeues: j.Requeues, State: j.State, Reason: j.Reason, Submitted: j.Submitted,
		Started: j.Started, CPUTime: j.CPUTime, MemPeak: j.MemPeak, Nodes: JobNodes(j),
		ArrayID: j.ArrayID, ArrayIndex: j.ArrayIndex}
	if h.Nodes == nil {
		h.Nodes = []string{}
	}
	begin := j.Submitted
	h.Events = []api.JobEvent{{Time: j.Submitted, Event: api.EventSubmitted,
		Detail: fmt.Sprintf("to partition %s", j.Partition)}}
	if n := len(j.Runs); j.Requeues > 0 && n == j.Requeues {
		// The run began with the requeue that ended the one before.
		r := j.Runs[n-1]
		begin = r.Ended
		h.Events = []api.JobEvent{{Time: begin, Event: api.EventRequeued, Detail: fmt.Sprintf("run %d: %s", j.Requeues+1, r.Reason)}}
	}
	if j.Started.IsZero() {
		h.Wait = max(now.Sub(begin), 0)
	} else {
		h.Wait, h.Run = j.Started.Sub(begin), max(now.Sub(j.Started), 0)
		h.Events = append(h.Events, api.JobEvent{Time: j.Started, Event: api.EventStarted, Detail: "on " + strings.Join(h.Nodes, ", ")})
	}
	return h
}

// WriteHistoryLong writes bhist -l: each run's summary and its timeline
// (a job a node failure requeued has a record for each run, numbered).
func WriteHistoryLong(w io.Writer, jobs []api.HistoryJob, loc *time.Location) error {
	for i, j := range jobs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if j.Requeues > 0 || j.State == api.JobRequeued {
			// One record a run: a requeued job's runs are numbered.
			fmt.Fprintf(w, "Job %s, run %d: %s\n", j.Ref(), j.Requeues+1, cell(j.Name))
		} else {
			fmt.Fprintf(w, "Job %s: %s\n", j.Ref(), cell(j.Name))
		}
		kv := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
		pair := func(k, v string) { fmt.Fprintf(kv, "  %s:\t%s\n", k, cell(printable(v))) }
		pair("User", j.User)
		pair("Partition", j.Partition)
		state := string(j.State)
		if j.Reason != "" {
			state += " (" + strings.TrimSpace(printable(oneLine(j.Reason))) + ")"
		}
		pair("State", state)
		pair("Exit code", HistoryExitCode(j))
		pair("Nodes", strings.Join(j.Nodes, ", "))
		pair("Wait", Elapsed(j.Wait))
		pair("Run", Elapsed(j.Run))
		pair("CPU time", CPUTime(j.CPUTime))
		pair("Mem peak", Memory(j.MemPeak))
		if err := kv.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		ev := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, e := range j.Events {
			fmt.Fprintf(ev, "  %s\t%s\t%s\n", Timestamp(e.Time, loc), e.Event, strings.TrimSpace(printable(oneLine(e.Detail))))
		}
		if err := ev.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// printable is s with every control character (a container's message
// may hold a terminal's escapes, a carriage return or a form feed, which
// would end or hide a line) and every byte that is not UTF-8 replaced by
// a space, so that each line of the long form is one line that ends with
// its newline.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f || r == utf8.RuneError || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, s)
}
