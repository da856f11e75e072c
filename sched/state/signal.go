package state

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// Signal is a bkill -s request: Signal for job JobID's containers (Host
// empty: all of them).
type Signal struct {
	JobID  uint64 `json:"job_id"`
	Signal int    `json:"signal"`
	Host   string `json:"host,omitempty"`
}

// signalJob records a signal request on a running job, for its nodelets
// to deliver: the job goes on running and ends as its containers' exits
// say. A job that has not started is cancelled by KILL, TERM or INT (as
// kill does) and refuses any other signal, but for STOP and CONT once it
// is placed (SCHEDULED or PREPARING, which bjobs shows as RUN): those are
// recorded, and its containers start stopped when the last of them is
// STOP (bstop, as LSF suspends a dispatched job).
func signalJob(txn *memdb.Txn, index uint64, now time.Time, s *Signal) (*Job, error) {
	if s == nil || s.Signal < 1 || s.Signal > 64 {
		return nil, errors.New("signal command without a signal from 1 to 64")
	}
	j, err := getJob(txn, s.JobID)
	if err != nil {
		return nil, err
	}
	sig := syscall.Signal(s.Signal)
	name := lifecycle.SignalName(s.Signal)
	switch {
	case j.State.Terminal():
		return nil, fmt.Errorf("job %d: %w (%s)", j.ID, ErrEnded, j.State)
	case j.Array != nil && lifecycle.Cancels(sig):
		return kill(txn, index, now, j.ID, false)
	case j.Array != nil:
		return nil, conflict("job %d is a job array: signal its elements one by one (bkill -s %s \"%d[INDEX]\"); KILL, TERM or INT cancels the whole array", j.ID, name, j.ID)
	case j.KillWanted:
		return nil, conflict("job %d is being stopped: its containers get no more signals", j.ID)
	case j.State != lifecycle.JobRunning && lifecycle.Cancels(sig):
		return kill(txn, index, now, j.ID, false)
	case (j.State == lifecycle.JobScheduled || j.State == lifecycle.JobPreparing) && (sig == syscall.SIGSTOP || sig == syscall.SIGCONT):
	case j.State != lifecycle.JobRunning:
		return nil, conflict("job %d is %s: only a running job's containers can get SIG%s; KILL, TERM or INT cancels it", j.ID, j.State, name)
	}
	if s.Host != "" {
		var hosts []string
		found := false
		for _, c := range j.Containers {
			hosts = append(hosts, c.Host)
			found = found || c.Host == s.Host
		}
		if !found {
			return nil, conflict("job %d has no container %s; its hosts: %s", j.ID, s.Host, strings.Join(hosts, ", "))
		}
	}
	j.Signals = append(append([]SignalRequest(nil), j.Signals...), SignalRequest{
		Seq: uint64(len(j.Signals)) + 1, Signal: s.Signal, Host: s.Host, Time: now,
	})
	j.ModifyIndex = index
	return j, txn.Insert(tableJobs, j)
}

// addUsage records a container's usage from its final update and sums
// the job's.
func addUsage(j *Job, c *Container, u ContainerUpdate) {
	if u.CPUTime <= 0 && u.MemPeak <= 0 {
		return
	}
	j.CPUTime += u.CPUTime - c.CPUTime
	j.MemPeak += u.MemPeak - c.MemPeak
	c.CPUTime, c.MemPeak = u.CPUTime, u.MemPeak
}
