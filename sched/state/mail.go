package state

import (
	"fmt"
	"slices"

	"github.com/hashicorp/go-memdb"
)

// MailSent (the act) records that the leader takes on sending one mail
// event of a job: committed before the mail is sent, so that no leader,
// this one after a restart or the next, sends it again.

// Mailed names one mail event of a job: "begin/RUN" (RUN the job's
// Requeues when it started) or "end".
type Mailed struct {
	JobID uint64 `json:"job_id"`
	Event string `json:"event"`
}

// MailBegin is the event of a job's run starting; MailEnd of its end.
func MailBegin(run int) string { return fmt.Sprintf("begin/%d", run) }

// MailEnd is the event of a job ending.
const MailEnd = "end"

// mailed marks the event; the answer is true when this command marked it
// (the caller sends the mail), false when it was marked already or the
// job is gone (the caller sends nothing).
func mailed(txn *memdb.Txn, index uint64, m *Mailed) (bool, error) {
	if m == nil || m.Event == "" {
		return false, fmt.Errorf("mailed names no event")
	}
	raw, err := txn.First(tableJobs, "id", m.JobID)
	if err != nil || raw == nil {
		return false, err
	}
	j := clone(raw.(*Job))
	if slices.Contains(j.Mailed, m.Event) {
		return false, nil
	}
	j.Mailed = append(slices.Clone(j.Mailed), m.Event)
	j.ModifyIndex = index
	return true, txn.Insert(tableJobs, j)
}
