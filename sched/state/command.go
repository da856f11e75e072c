package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/troupe-hpc/troupe/sched/partition"
)

// Command is one raft log entry: one act (Act), the leader's clock when
// it proposed the entry (Time, so every replica stamps the same times)
// and the schema it is written in (Version, the SchemaVersion the
// leader writes: raftlog). On the wire (schema 11 on) an entry is
//
//	{"v": 11, "kind": "kill", "time": "…", "act": {…}}
//
// its act's payload decoded by its kind; entries of older schemas are the
// union of every kind's fields they were (v10Command), still read, and
// still written while the cluster's schema is older.
type Command struct {
	Version int
	Time    time.Time
	Act     Act
}

// Act is what one entry does. Each kind is its own type: Submit,
// Register, Place, Reports, Kill, Hold, Release, Configure, Charge,
// Timeout, NodesDown, NodeUp, PutToken, Revoke, PutServer, DrainNodes,
// SignalJob, Purge, MailSent, Touch, AdoptEnd, CreateReservation,
// UpdateReservation, DeleteReservation, StopReserved, Suspend, Resume, Resumed, Warn,
// Health. Acts new in schema 11 (the reservations', suspension's and
// warnings', Health) have no form in older ones: while a peer reads an
// older schema the leader proposes none (NeedsSchema), and toV10
// refuses them.
type Act interface {
	// Kind names the act in the log ("submit", "kill", …).
	Kind() string
}

// Request is a client's request id on an act it may retry (a kill, hold,
// release or signal), with its sender: an act whose id was applied
// already changes nothing and answers as the first did (requests.go).
// A request id is known by its sender and the id together, so that one
// user's id never answers for another's act; entries of schemas before
// 7 carry no sender, and match each other by the id alone.
type Request struct {
	ID string `json:"id,omitempty"`
	By string `json:"by,omitempty"`
}

// WithRequest is a with request r, when a is an act a client may retry
// (a kill, hold, release, signal, suspend or resume) that carries none
// yet; a itself otherwise.
func WithRequest(a Act, r Request) Act {
	if r.ID == "" {
		return a
	}
	switch x := a.(type) {
	case Kill:
		if x.Request.ID == "" {
			x.Request = r
		}
		return x
	case Hold:
		if x.Request.ID == "" {
			x.Request = r
		}
		return x
	case Release:
		if x.Request.ID == "" {
			x.Request = r
		}
		return x
	case SignalJob:
		if x.Request.ID == "" {
			x.Request = r
		}
		return x
	case Suspend:
		if x.Request.ID == "" {
			x.Request = r
		}
		return x
	case Resume:
		if x.Request.ID == "" {
			x.Request = r
		}
		return x
	}
	return a
}

// JobRef names the job an act is on: a job, a whole job array, or with
// Index one element of an array (bkill "12[5]").
type JobRef struct {
	ID    uint64 `json:"id"`
	Index *int   `json:"index,omitempty"`
}

// Submit stores jobs (bsub, sbatch, the web portal). Each: every job is
// stored or refused on its own, in order, as if it came alone (single
// submits the leader commits together); else all of them with
// consecutive ids, or none (bsub --count, several files at once, or one
// job). Apply answers the new jobs' ids ([]uint64), or with Each each
// job's outcome ([]Submitted).
type Submit struct {
	Jobs []*Job `json:"jobs"`
	Each bool   `json:"each,omitempty"`
}

// Register records a node as its nodelet registers.
type Register struct {
	Node *Node `json:"node"`
}

// Place puts the scheduler core's plan in force: placements and pending
// reasons.
type Place struct {
	Plan *Plan `json:"plan"`
}

// Reports are nodelets' reports on their containers, applied in order
// (the leader commits the reports that arrive together in one entry).
// Apply answers each report's jobs moved to RUNNING ([][]Started).
type Reports struct {
	Reports []Report `json:"reports"`
}

// Kill ends a job (bkill): Done records it COMPLETED, not CANCELLED
// (bkill -d). Apply answers the job.
type Kill struct {
	Job     JobRef  `json:"job"`
	Done    bool    `json:"done,omitempty"`
	Request Request `json:"request,omitzero"`
}

// Hold makes a pending job HELD (bhold, scontrol hold). Apply answers the
// job.
type Hold struct {
	Job     JobRef  `json:"job"`
	Request Request `json:"request,omitzero"`
}

// Release makes a held job PENDING again (brelease, scontrol release).
// Apply answers the job.
type Release struct {
	Job     JobRef  `json:"job"`
	Request Request `json:"request,omitzero"`
}

// Configure puts a partitions config in force (schedd start, badmin
// reconfig).
type Configure struct {
	Config *partition.Config `json:"config"`
}

// Charge charges usage up to the entry's time (the leader, periodically).
type Charge struct{}

// Timeout ends the jobs the leader found past their walltime.
type Timeout struct {
	Jobs []uint64 `json:"jobs"`
}

// NodesDown marks nodes silent past the node timeout DOWN (the leader).
type NodesDown struct {
	Down *NodeDown `json:"down"`
}

// NodeUp marks a DOWN node heard from again UP.
type NodeUp struct {
	Node string `json:"node"`
}

// PutToken adds (or replaces, same id) a bearer token record.
type PutToken struct {
	Token *Token `json:"token"`
}

// Revoke deletes a bearer token record.
type Revoke struct {
	ID string `json:"id"`
}

// PutServer records a raft server's API address (the leader, on taking
// office).
type PutServer struct {
	Server *Server `json:"server"`
}

// DrainNodes drains or resumes nodes (badmin drain, badmin resume).
type DrainNodes struct {
	Drain *Drain `json:"drain"`
}

// SignalJob signals a running job's containers, or cancels a pending job
// (bkill -s). Apply answers the job.
type SignalJob struct {
	Signal  *Signal `json:"signal"`
	Request Request `json:"request,omitzero"`
}

// Purge drops ended jobs the accounting store now holds.
type Purge struct {
	Keys []PurgeKey `json:"keys"`
}

// MailSent records a mail event the leader takes on sending.
type MailSent struct {
	Mailed *Mailed `json:"mailed"`
}

// Touch changes nothing and moves every table's index (after a
// restore).
type Touch struct{}

// AdoptEnd ends the jobs still adopting once the adoption window after
// a restore into an empty state has closed (the leader).
type AdoptEnd struct{}

// Kinds of acts, as the log names them.
const (
	CmdSubmit   = "submit"
	CmdRegister = "register"
	CmdPlan     = "plan"
	CmdReports  = "reports"
	CmdKill     = "kill"
	CmdHold     = "hold"
	CmdRelease  = "release"
	CmdConfig   = "config"
	CmdCharge   = "charge"
	CmdTimeout  = "timeout"
	CmdNodeDown = "node-down"
	CmdNodeUp   = "node-up"
	CmdTouch    = "touch"
	CmdToken    = "token"
	CmdRevoke   = "revoke"
	CmdServer   = "server"
	CmdDrain    = "drain"
	CmdSignal   = "signal"
	CmdPurge    = "purge"
	CmdMailed   = "mailed"
	CmdAdoptEnd = "adopt-end"
	CmdHealth   = "health"
	CmdSuspend  = "suspend"
	CmdResume   = "resume"
	CmdResumed  = "resumed"
	CmdWarn     = "warn"

	CmdCreateReservation = "reservation-create"
	CmdUpdateReservation = "reservation-update"
	CmdDeleteReservation = "reservation-delete"
)

func (Submit) Kind() string     { return CmdSubmit }
func (Register) Kind() string   { return CmdRegister }
func (Place) Kind() string      { return CmdPlan }
func (Reports) Kind() string    { return CmdReports }
func (Kill) Kind() string       { return CmdKill }
func (Hold) Kind() string       { return CmdHold }
func (Release) Kind() string    { return CmdRelease }
func (Configure) Kind() string  { return CmdConfig }
func (Charge) Kind() string     { return CmdCharge }
func (Timeout) Kind() string    { return CmdTimeout }
func (NodesDown) Kind() string  { return CmdNodeDown }
func (NodeUp) Kind() string     { return CmdNodeUp }
func (PutToken) Kind() string   { return CmdToken }
func (Revoke) Kind() string     { return CmdRevoke }
func (PutServer) Kind() string  { return CmdServer }
func (DrainNodes) Kind() string { return CmdDrain }
func (SignalJob) Kind() string  { return CmdSignal }
func (Purge) Kind() string      { return CmdPurge }
func (MailSent) Kind() string   { return CmdMailed }
func (Touch) Kind() string      { return CmdTouch }
func (AdoptEnd) Kind() string   { return CmdAdoptEnd }
func (Suspend) Kind() string    { return CmdSuspend }
func (Resume) Kind() string     { return CmdResume }
func (Resumed) Kind() string    { return CmdResumed }
func (Warn) Kind() string       { return CmdWarn }

func (CreateReservation) Kind() string { return CmdCreateReservation }
func (UpdateReservation) Kind() string { return CmdUpdateReservation }
func (DeleteReservation) Kind() string { return CmdDeleteReservation }

// decoders decode an entry's payload by its kind.
var decoders = map[string]func(json.RawMessage) (Act, error){
	CmdSubmit:            decodeAct[Submit],
	CmdRegister:          decodeAct[Register],
	CmdPlan:              decodeAct[Place],
	CmdReports:           decodeAct[Reports],
	CmdKill:              decodeAct[Kill],
	CmdHold:              decodeAct[Hold],
	CmdRelease:           decodeAct[Release],
	CmdConfig:            decodeAct[Configure],
	CmdCharge:            decodeAct[Charge],
	CmdTimeout:           decodeAct[Timeout],
	CmdNodeDown:          decodeAct[NodesDown],
	CmdNodeUp:            decodeAct[NodeUp],
	CmdToken:             decodeAct[PutToken],
	CmdRevoke:            decodeAct[Revoke],
	CmdServer:            decodeAct[PutServer],
	CmdDrain:             decodeAct[DrainNodes],
	CmdSignal:            decodeAct[SignalJob],
	CmdPurge:             decodeAct[Purge],
	CmdMailed:            decodeAct[MailSent],
	CmdTouch:             decodeAct[Touch],
	CmdAdoptEnd:          decodeAct[AdoptEnd],
	CmdSuspend:           decodeAct[Suspend],
	CmdResume:            decodeAct[Resume],
	CmdResumed:           decodeAct[Resumed],
	CmdWarn:              decodeAct[Warn],
	CmdCreateReservation: decodeAct[CreateReservation],
	CmdUpdateReservation: decodeAct[UpdateReservation],
	CmdDeleteReservation: decodeAct[DeleteReservation],
	CmdStopReserved:      decodeAct[StopReserved],
	CmdHealth:            decodeAct[Health],
}

// decodeAct is payload b as an act of type T (the zero one when b is
// empty).
func decodeAct[T Act](b json.RawMessage) (Act, error) {
	var a T
	if len(b) > 0 {
		if err := json.Unmarshal(b, &a); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Kind is the kind of c's act ("" without one).
func (c Command) Kind() string {
	if c.Act == nil {
		return ""
	}
	return c.Act.Kind()
}

// envelope is an entry on the wire: its payload is decoded by its kind.
type envelope struct {
	Version int             `json:"v,omitempty"`
	Kind    string          `json:"kind"`
	Time    time.Time       `json:"time"`
	Act     json.RawMessage `json:"act,omitempty"`
}

// MarshalJSON writes c in its schema: the envelope from schema 11 on,
// the union of earlier schemas before (v10Command).
func (c Command) MarshalJSON() ([]byte, error) {
	if c.Act == nil {
		return nil, fmt.Errorf("raft entry: %w", ErrNoAct)
	}
	if c.Version < commandSchema {
		o, err := toV10(c)
		if err != nil {
			return nil, err
		}
		return json.Marshal(o)
	}
	act, err := json.Marshal(c.Act)
	if err != nil {
		return nil, err
	}
	return json.Marshal(envelope{Version: c.Version, Kind: c.Act.Kind(), Time: c.Time, Act: act})
}

// UnmarshalJSON reads an entry of any schema.
func (c *Command) UnmarshalJSON(b []byte) error {
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return err
	}
	if e.Version < commandSchema {
		var old v10Command
		if err := json.Unmarshal(b, &old); err != nil {
			return err
		}
		cmd, err := old.command()
		if err != nil {
			return err
		}
		*c = cmd
		return nil
	}
	decode, ok := decoders[e.Kind]
	if !ok {
		return fmt.Errorf("raft entry of schema %d: %w %q", e.Version, ErrUnknownKind, e.Kind)
	}
	act, err := decode(e.Act)
	if err != nil {
		return fmt.Errorf("raft entry %s: %w", e.Kind, err)
	}
	*c = Command{Version: e.Version, Time: e.Time, Act: act}
	return nil
}

// Errors of entries that cannot be read or written.
var (
	ErrUnknownKind = errors.New("unknown command kind")
	ErrNoAct       = errors.New("command without an act")
	// ErrNoOldForm marks an act written in a schema older than the one
	// it is new in (a reservation's): a peer of that schema would not
	// know it.
	ErrNoOldForm = errors.New("act has no form in an older schema")
)

// commandSchema is the first schema of typed entries.
const commandSchema = 11
