package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

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
		pair := func(k, v string) { fmt.Fprintf(kv, "  %s:\t%s\n", k, cell(v)) }
		pair("User", j.User)
		pair("Partition", j.Partition)
		state := string(j.State)
		if j.Reason != "" {
			state += " (" + oneLine(j.Reason) + ")"
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
			fmt.Fprintf(ev, "  %s\t%s\t%s\n", Timestamp(e.Time, loc), e.Event, oneLine(e.Detail))
		}
		if err := ev.Flush(); err != nil {
			return err
		}
	}
	return nil
}
