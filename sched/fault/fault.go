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
	// Invalid marks a request that can never succeed as sent (400).
	Invalid = errors.New("invalid request")
	// QueueFull marks a submission past a queue limit: it may succeed
	// later (429); it is also Invalid.
	QueueFull = fmt.Errorf("%w: queue limit reached", Invalid)
	// Unauthenticated marks a missing, unknown or revoked bearer token (401).
	Unauthenticated = errors.New("unauthenticated")
	// Forbidden marks a request its caller may not make (403).
	Forbidden = errors.New("permission denied")
	// NotFound marks what names nothing in the state (404).
	NotFound = errors.New("not found")
	// Ended marks a job that has already ended (409).
	Ended = errors.New("already ended")
	// Conflict marks a job or node in a state the request does not
	// apply to (409).
	Conflict = errors.New("conflict")
	// Unavailable marks a far end (a nodelet) that did not answer in
	// time (504).
	Unavailable = errors.New("terminal unavailable")
	// DiskFull marks a write refused because the data dir is full (507).
	DiskFull = errors.New("schedd data dir full")
	// NotLeader marks a write that never entered the log: this server
	// cannot take writes now (503, safe to send again).
	NotLeader = errors.New("not the raft leader")
	// UnknownOutcome marks a write that reached the log with its fate
	// unknown here (504; only an idempotent request may be sent again).
	UnknownOutcome = errors.New("outcome unknown")
)
