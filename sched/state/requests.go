package state

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"
)

// RequestTTL is how long the answer to an applied hold, release, kill or
// signal stays on record under its request id: a client that lost the
// answer (a leader that lost office mid-commit, a cut connection) and
// sends the same request again within it gets the first answer back
// instead of the job's later state ("already held"). Clients give up far
// sooner (their overall timeout, 60 s by default).
const RequestTTL = 15 * time.Minute

const tableRequests = "requests"

// request is the record of an applied job command sent with a request id,
// known by its sender and the id together (By is "" in records and
// entries written before commands carried their sender: those match
// each other as before).
type request struct {
	ID    string    `json:"id"`
	By    string    `json:"by,omitempty"`
	Kind  string    `json:"kind"`
	JobID uint64    `json:"job_id"`
	Index uint64    `json:"index"` // the raft index that applied it
	Time  time.Time `json:"time"`
	// Answer is the job as the first application returned it.
	Answer *Job `json:"answer"`
}

var requestsTable = &memdb.TableSchema{Name: tableRequests, Indexes: map[string]*memdb.IndexSchema{
	"id":    {Name: "id", Unique: true, Indexer: senderRequestIndex{}},
	"index": {Name: "index", Unique: true, Indexer: &memdb.UintFieldIndex{Field: "Index"}},
}}

// userRequestIndex indexes jobs by their user and their submit's
// request id together (a job without a request id is not indexed): a
// retried submit is known by both, so that one user cannot reach
// another's job by sending the same request id.
type userRequestIndex struct{}

func userRequestKey(user, req string) ([]byte, error) {
	if strings.IndexByte(user, 0) >= 0 {
		return nil, fmt.Errorf("user request index: user name %q holds a NUL", user)
	}
	return []byte(user + "\x00" + req + "\x00"), nil
}

func (userRequestIndex) FromObject(raw any) (bool, []byte, error) {
	j := raw.(*Job)
	if j.RequestID == "" {
		return false, nil, nil
	}
	k, err := userRequestKey(j.User, j.RequestID)
	return err == nil, k, err
}

func (userRequestIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("user request index wants (user, request id), got %d arguments", len(args))
	}
	user, ok1 := args[0].(string)
	req, ok2 := args[1].(string)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("user request index wants (string, string), got (%T, %T)", args[0], args[1])
	}
	return userRequestKey(user, req)
}

// senderRequestIndex indexes request records by their sender and id
// together.
type senderRequestIndex struct{}

func (senderRequestIndex) FromObject(raw any) (bool, []byte, error) {
	r := raw.(*request)
	k, err := userRequestKey(r.By, r.ID)
	return err == nil, k, err
}

func (senderRequestIndex) FromArgs(args ...any) ([]byte, error) {
	return userRequestIndex{}.FromArgs(args...)
}

// requested is the request id an act a client may retry carries (a
// kill, hold, release, signal, suspend or resume) and the job it is on; ok is false for
// the other acts.
func requested(a Act) (r Request, job uint64, ok bool) {
	switch a := a.(type) {
	case Kill:
		return a.Request, a.Job.ID, true
	case Hold:
		return a.Request, a.Job.ID, true
	case Release:
		return a.Request, a.Job.ID, true
	case SignalJob:
		if a.Signal != nil {
			job = a.Signal.JobID
		}
		return a.Request, job, true
	case Suspend:
		return a.Request, a.Job, true
	case Resume:
		return a.Request, a.Job, true
	}
	return Request{}, 0, false
}

// repeated returns the first answer to c's request id from the same
// sender, if it was applied already; a request id the sender reused for
// another command is a conflict. Another sender's request of the same id
// is not c's.
func repeated(txn *memdb.Txn, kind string, req Request, job uint64) (*Job, bool, error) {
	raw, err := txn.First(tableRequests, "id", req.By, req.ID)
	if err != nil || raw == nil {
		return nil, false, err
	}
	r := raw.(*request)
	if r.Kind != kind || r.JobID != job {
		return nil, true, conflict("request id %s was already used to %s job %d", req.ID, r.Kind, r.JobID)
	}
	return r.Answer, true, nil
}

// remember records the answer to request req (of a kind act on job) and
// forgets the requests older than RequestTTL (by the leader's clock
// carried in the command, now, so every replica forgets the same ones).
func remember(txn *memdb.Txn, index uint64, now time.Time, kind string, req Request, job uint64, answer *Job) error {
	it, err := txn.Get(tableRequests, "index")
	if err != nil {
		return err
	}
	var old []*request
	for raw := it.Next(); raw != nil; raw = it.Next() {
		r := raw.(*request)
		if !r.Time.Before(now.Add(-RequestTTL)) {
			break
		}
		old = append(old, r)
	}
	for _, r := range old {
		if err := txn.Delete(tableRequests, r); err != nil {
			return err
		}
	}
	return txn.Insert(tableRequests, &request{ID: req.ID, By: req.By, Kind: kind, JobID: job, Index: index, Time: now, Answer: answer})
}

// Requests is the number of request answers on record.
func (v *Snapshot) Requests() int {
	it, err := v.txn.Get(tableRequests, "id")
	if err != nil {
		panic(err)
	}
	n := 0
	for raw := it.Next(); raw != nil; raw = it.Next() {
		n++
	}
	return n
}

func (v *Snapshot) requests() []*request {
	it, err := v.txn.Get(tableRequests, "index")
	if err != nil {
		panic(err)
	}
	var out []*request
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*request))
	}
	return out
}
