package api

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// SignalJob asks that a job's containers get a signal (POST
// /v1/jobs/{id}/signal; bkill -s, scancel -s). Signal is a name (USR1,
// SIGUSR1) or a number; Host, when set, picks one container.
type SignalJob struct {
	Signal string `json:"signal"`
	Host   string `json:"host,omitempty"`
}

// SignalRequest is one signal request a running job holds, in the order
// they were made: nodelets deliver each to every container it names once
// (Host empty: all), remembering the last Seq they delivered.
type SignalRequest struct {
	Seq    uint64    `json:"seq"`
	Signal int       `json:"signal"`
	Host   string    `json:"host,omitempty"`
	Time   time.Time `json:"time"`
}

// ParseSignal reads a signal as bkill -s takes it: a name with or without
// SIG, any case (USR1, sigusr1, SIGUSR1), or a number from 1 to 64.
func ParseSignal(s string) (syscall.Signal, error) {
	t := strings.TrimSpace(s)
	if n, err := strconv.Atoi(t); err == nil {
		if n < 1 || n > 64 {
			return 0, fmt.Errorf("signal %s: numbers go from 1 to 64", s)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(t)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 && t != "" {
		return sig, nil
	}
	return 0, fmt.Errorf("signal %q: unknown; use a name such as USR1, HUP, INT, TERM, KILL, STOP, CONT, or a number", s)
}

// SignalName is sig's name without SIG ("USR1"), or its number.
func SignalName(sig int) string { return lifecycle.SignalName(sig) }

// Cancels reports whether sig, sent to a job that does not run yet,
// cancels it (KILL, TERM, INT), as LSF's bkill -s does.
func Cancels(sig syscall.Signal) bool { return lifecycle.Cancels(sig) }

// HistoryJob is one ended job as bhist shows it (GET /v1/history).
type HistoryJob struct {
	ID        uint64 `json:"id"`
	Name      string `json:"name"`
	User      string `json:"user"`
	UID       int    `json:"uid"`
	Partition string `json:"partition"`
	Account   string `json:"account,omitempty"`
	// Requeues is the job's run: how many times a node failure put it
	// back in the queue before this run. Each run has its own record,
	// keyed by the job's id and its run; an earlier run's State is
	// REQUEUED and its Reason says why.
	Requeues  int       `json:"requeues,omitempty"`
	State     JobState  `json:"state"`
	Reason    string    `json:"reason,omitempty"`
	ExitCode  int       `json:"exit_code"`
	Submitted time.Time `json:"submitted"`
	Started   time.Time `json:"started,omitzero"`
	Ended     time.Time `json:"ended"`
	// Wait is Started − Submitted (Ended − Submitted when it never
	// started); for a later run, from the requeue that began it.
	Wait    time.Duration `json:"wait"`
	Run     time.Duration `json:"run"` // Ended − Started; 0 when it never started
	CPUTime time.Duration `json:"cpu_time"`
	MemPeak int64         `json:"mem_peak"`
	Nodes   []string      `json:"nodes"`          // the distinct nodes its containers ran on, in container order
	GPUs    float64       `json:"gpus,omitempty"` // the GPUs its containers asked for, summed
	Events  []JobEvent    `json:"events"`
	// Containers are each container's end: host, node, state, exit code,
	// usage.
	Containers []HistoryContainer `json:"containers,omitempty"`
	// ArrayID and ArrayIndex are set for an element of a job array: the
	// array's id and the element's index (bhist shows ID[INDEX]).
	ArrayID    uint64 `json:"array_id,omitempty"`
	ArrayIndex int    `json:"array_index,omitempty"`
}

// Ref is how users name the job: "12", or "12[5]" for an element.
func (h *HistoryJob) Ref() string {
	j := Job{ID: h.ID, ArrayID: h.ArrayID, ArrayIndex: h.ArrayIndex}
	return j.Ref()
}

// HistoryContainer is one container of an ended job as it ended.
type HistoryContainer struct {
	Host     string         `json:"host"`
	Node     string         `json:"node,omitempty"`
	State    ContainerState `json:"state"`
	ExitCode int            `json:"exit_code"`
	Message  string         `json:"message,omitempty"`
	CPUTime  time.Duration  `json:"cpu_time,omitempty"`
	MemPeak  int64          `json:"mem_peak,omitempty"`
	// Ended is when it ended, as its node measured it (schedd's clock);
	// zero when no node told (lost with its node, or never started).
	Ended time.Time `json:"ended,omitzero"`
}

// Accounting answers GET /v1/accounting (bacct): ended jobs summed per
// group, between two end times.
type Accounting struct {
	GroupBy string          `json:"group_by"` // user, account or partition
	Rows    []AccountingRow `json:"rows"`
	Total   AccountingRow   `json:"total"`
}

// AccountingRow sums the ended jobs of one user, account or partition.
// Jobs counts the jobs' last runs; the times and GPU hours sum every
// ended run, those a requeue ended (REQUEUED) too.
type AccountingRow struct {
	Group     string        `json:"group"`
	Jobs      int64         `json:"jobs"`
	Completed int64         `json:"completed"`
	Failed    int64         `json:"failed"` // FAILED, TIMEOUT (CANCELLED counts in neither)
	Wait      time.Duration `json:"wait"`   // summed queue wait
	Run       time.Duration `json:"run"`    // summed run time
	CPUTime   time.Duration `json:"cpu_time"`
	GPUHours  float64       `json:"gpu_hours"` // GPUs × run time
}

// JobEvent is one step of a job's timeline: submitted, started,
// signalled, requeued, ended.
type JobEvent struct {
	Time   time.Time `json:"time"`
	Event  string    `json:"event"`
	Detail string    `json:"detail,omitempty"`
}

// Job events.
const (
	EventSubmitted = "submitted"
	EventStarted   = "started"
	EventSignalled = "signalled"
	EventEnded     = "ended"
	EventRequeued  = "requeued"
)

// History answers GET /v1/history: ended jobs, oldest end first.
type History struct {
	Jobs  []HistoryJob `json:"jobs"`
	Index uint64       `json:"index"`
}
