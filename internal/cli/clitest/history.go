package clitest

import (
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// History are bhist fixtures, oldest end first: a job that completed
// after a signal, one cancelled before it started, one that failed.
func History() []api.HistoryJob {
	done := api.HistoryJob{
		ID: 3, Name: "prep", User: "alice", Partition: "cpu", State: api.JobCompleted,
		Submitted: at(5 * time.Hour), Started: at(4 * time.Hour), Ended: at(3*time.Hour + 30*time.Minute),
		Wait: time.Hour, Run: 30 * time.Minute, CPUTime: 52*time.Minute + 30*time.Second, MemPeak: 1536 << 20,
		Nodes: []string{"node03", "node01"},
		Events: []api.JobEvent{
			{Time: at(5 * time.Hour), Event: api.EventSubmitted, Detail: "to partition cpu, 2 containers"},
			{Time: at(4 * time.Hour), Event: api.EventStarted, Detail: "on node03, node01"},
			{Time: at(3*time.Hour + 40*time.Minute), Event: api.EventSignalled, Detail: "SIGUSR1 to all containers"},
			{Time: at(3*time.Hour + 30*time.Minute), Event: api.EventEnded, Detail: "COMPLETED, exit code 0"},
		},
	}
	cancelled := api.HistoryJob{
		ID: 9, Name: "oops", User: "alice", Partition: "cpu", State: api.JobCancelled,
		Submitted: at(time.Hour), Ended: at(50 * time.Minute), Wait: 10 * time.Minute, Nodes: []string{},
		Events: []api.JobEvent{
			{Time: at(time.Hour), Event: api.EventSubmitted, Detail: "to partition cpu, 1 container"},
			{Time: at(50 * time.Minute), Event: api.EventEnded, Detail: "CANCELLED, exit code 0"},
		},
	}
	failed := api.HistoryJob{
		ID: 7, Name: "bad\tname", User: "carol", Partition: "gpu", State: api.JobFailed, Reason: "sub1: exec failed",
		ExitCode: 3, Submitted: at(40 * time.Minute), Started: at(39 * time.Minute), Ended: at(39*time.Minute - 5*time.Second),
		Wait: time.Minute, Run: 5 * time.Second, CPUTime: 1520 * time.Millisecond, MemPeak: 812 << 10,
		Nodes: []string{"node02"},
		Events: []api.JobEvent{
			{Time: at(40 * time.Minute), Event: api.EventSubmitted, Detail: "to partition gpu, 2 containers"},
			{Time: at(39 * time.Minute), Event: api.EventStarted, Detail: "on node02"},
			{Time: at(39*time.Minute - 5*time.Second), Event: api.EventEnded, Detail: "FAILED, exit code 3: sub1: exec failed"},
		},
	}
	return []api.HistoryJob{done, cancelled, failed}
}
