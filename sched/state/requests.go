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

// userRequestIndex indexes jobs by their submit's request id and their
// user together (a job without a request id is not indexed): a retried
// submit is known by both, so that one user cannot reach another's job
// by sending the same request id. The key puts the request id first, so
// that with the request id alone as a prefix it also finds the jobs of
// entries older than schema 7, which knew a retry by its request id
// alone (jobsOfRequest): one index where there were two.
type userRequestIndex struct{}

func userRequestKey(user, req string) ([]byte, error) {
	if strings.IndexByte(user, 0) >= 0 {
		return nil, fmt.Errorf("user request index: user name %q holds a NUL", user)
	}
	return []byte(user + "\x00" + req + "\x00"), nil
}

// requestUserKey is a job's key in userRequestIndex: unambiguous, as a
// user name holds no NUL.
func requestUserKey(req, user string) ([]byte, error) {
	if strings.IndexByte(user, 0) >= 0 {
		return nil, fmt.Errorf("user request index: user name %q holds a NUL", user)
	}
	return []byte(req + "\x00" + user + "\x00"), nil
}

func (userRequestIndex) FromObject(raw any) (bool, []byte, error) {
	j := raw.(*Job)
	if j.RequestID == "" {
		return false, nil, nil
	}
	k, err := requestUserKey(j.RequestID, j.User)
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
	return requestUserKey(req, user)
}

// PrefixFromArgs is the prefix of the keys of request id args[0], any
// user's (a request id holding a NUL may match others too: the caller
// compares).
func (userRequestIndex) PrefixFromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("user request prefix wants a request id, got %d arguments", len(args))
	}
	req, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("user request prefix wants a string, got %T", args[0])
	}
	return []byte(req + "\x00"), nil
}

// jobOfRequest is the job an entry older than schema 7 made of request
// id req, whoever sent it (the lowest id, as the index by request id
// alone answered), or nil.
func jobOfRequest(txn *memdb.Txn, req string) (*Job, error) {
	it, err := txn.Get(tableJobs, "user_request_prefix", req)
	if err != nil {
		return nil, err
	}
	var first *Job
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if j := raw.(*Job); j.RequestID == req && (first == nil || j.ID < first.ID) {
			first = j
		}
	}
	return first, nil
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
	if len(args) != 2 {
		return nil, fmt.Errorf("sender request index wants (user, request id), got %d arguments", len(args))
	}
	user, ok1 := args[0].(string)
	req, ok2 := args[1].(string)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("sender request index wants (string, string), got (%T, %T)", args[0], args[1])
	}
	return userRequestKey(user, req)
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
