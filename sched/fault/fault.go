// Package fault names the kinds of failure the controller's operations
// report, so that the HTTP layer (sched/httpapi) can map each to its
// status without importing the packages that produce them (sched,
// sched/state, sched/raftlog and the raft library behind it). Those
// packages keep their own names for these errors (sched.ErrInvalid,
// state.ErrNotFound, raftlog.ErrNotLeader, …), each the same value as
// the one here, so errors.Is answers alike through either name.
//
// It imports only the standard library, and nothing may be added here
// but error values.
package fault

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid marks a request that can never succeed as sent (400).
	ErrInvalid = errors.New("invalid request")
	// ErrQueueFull marks a submission past a queue limit: it may succeed
	// later (429); it is also ErrInvalid.
	ErrQueueFull = fmt.Errorf("%w: queue limit reached", ErrInvalid)
	// ErrTooMany marks a terminal or app stream past a cap on open
	// streams (per job, per user, in all): it may succeed once others
	// end (429).
	ErrTooMany = errors.New("stream limit reached")
	// ErrUnauthenticated marks a missing, unknown or revoked bearer token (401).
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden marks a request its caller may not make (403).
	ErrForbidden = errors.New("permission denied")
	// ErrNotFound marks what names nothing in the state (404).
	ErrNotFound = errors.New("not found")
	// ErrEnded marks a job that has already ended (409).
	ErrEnded = errors.New("already ended")
	// ErrConflict marks a job or node in a state the request does not
	// apply to (409).
	ErrConflict = errors.New("conflict")
	// ErrUnavailable marks a far end (a nodelet) that did not answer in
	// time (504).
	ErrUnavailable = errors.New("terminal unavailable")
	// ErrDiskFull marks a write refused because the data dir is full (507).
	ErrDiskFull = errors.New("schedd data dir full")
	// ErrNotLeader marks a write that never entered the log: this server
	// cannot take writes now (503, safe to send again).
	ErrNotLeader = errors.New("not the raft leader")
	// ErrUnknownOutcome marks a write that reached the log with its fate
	// unknown here (504; only an idempotent request may be sent again).
	ErrUnknownOutcome = errors.New("outcome unknown")
)
