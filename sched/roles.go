package sched

import (
	"log/slog"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/accounting"
	"github.com/troupe-hpc/troupe/internal/connlimit"
	"github.com/troupe-hpc/troupe/sched/raftlog"
	"github.com/troupe-hpc/troupe/sched/state"
)

// The controller's rooms. A Server is a replica and seven roles, each a
// type of its own with the state only it keeps; the Server wires them
// (Open) and serves httpapi.Controller through the methods they promote.
// A method keeps the file of its subject; its receiver says whose it is.
//
//	replica    the state, the raft log, writes (apply), the wake-up of
//	           the loop and blocking reads: what every role reads and
//	           writes through (server.go, controller.go, leader.go)
//	lifecycle  a job from submit to end: admission, submits, kill, hold,
//	           release, signals, the nodelets' container reports, job
//	           views and job mail (server.go, admit.go, controller.go,
//	           reports.go, view.go, mail.go)
//	fleet      the nodes: registration, heartbeats and leases, the
//	           fence against two nodelets on one name, silent nodes
//	           marked DOWN, drains, assignments (server.go, nodefail.go,
//	           drain.go, controller.go)
//	scheduler  the scheduling loop (loop.go): a steppable machine
//	           (loopMachine) and the passes it asks for, with what a pass
//	           leaves for the views (start estimates, ranks)
//	ledger     ended jobs and what they cost: export to the accounting
//	           store, bhist and bacct, fair share, snapshot files and
//	           restores (export.go, controller.go, snapfile.go,
//	           restore.go)
//	sessions   the streams to running jobs: terminal attach and the /apps
//	           proxy, within the caps on open streams (attach.go,
//	           apps.go, streams.go)
//	access     bearer tokens and node credentials (tokens.go)
//	calendar   reservations: nodes set aside for a window
//	           (reservations.go)
//
// Roles reach each other only through the pointers they are given:
// fleet asks access for a node's credential, scheduler asks fleet for the
// silent nodes, lifecycle asks scheduler for a pending job's estimates
// and ledger for a job array's elements gone to the accounting store,
// ledger holds placements back through scheduler after a restore.

// replica is what every role shares: the replicated state and the raft
// log it is written through, the settings and the metrics.
type replica struct {
	cfg  Config
	log  *slog.Logger
	st   *state.Store
	raft *raftlog.Log
	// restoreMu: every write (apply) holds it shared; a restore holds it
	// alone from reading the live state to putting the backup in force,
	// so that no write lands between (and is lost, or its id given again).
	restoreMu sync.RWMutex
	kick      chan struct{} // wake: a change the loop must see
	nodes     nodeCache     // empty nodes and submit's can-ever-fit answers
	metrics   *metrics
}

// lifecycle is a job's life from submit to end.
type lifecycle struct {
	*replica
	reports groupCommit[state.Report, []state.Started] // nodelet reports waiting to share a raft entry
	submits groupCommit[*state.Job, state.Submitted]   // single submits waiting to share a raft entry
	loop    *scheduler                                 // the last pass's estimates and ranks, for the views
	ledger  *ledger                                    // an array's ended elements gone to the accounting store
}

// fleet is the nodes as the leader knows them.
type fleet struct {
	*replica
	access *access // issues a node's credential at its register
	mu     sync.Mutex
	seen   map[string]time.Time // node heartbeats: leader-local, not replicated
	// leadSince is when this server started leading: nodes it has not
	// heard from yet count as heard from then.
	leadSince time.Time
}

// scheduler is the scheduling loop and what its passes leave behind.
type scheduler struct {
	*replica
	fleet *fleet // which nodes are silent, and marking them DOWN
	mu    sync.Mutex
	// starts are the reserved jobs' estimated starts of the last pass:
	// leader-local, recomputed every pass, kept out of the raft log.
	starts map[uint64]time.Time
	// backlog is the waiting jobs in priority order, kept between
	// passes, and what the last pass ranked them with (their priorities
	// and queue positions): leader-local like starts.
	backlog backlog
	// adoptEnded is the end of the last adoption window after a restore
	// (state.Snapshot.AdoptUntil) whose leftovers this leader has ended
	// (CmdAdoptEnd); the scheduling loop's alone.
	adoptEnded time.Time
}

// ledger is the ended jobs' way out of the replicated state, their
// history and the snapshot files.
type ledger struct {
	*replica
	acct     *accounting.Store
	exportMu sync.Mutex // one export at a time; guards exp
	exp      exporter
}

// sessions are the streams to running jobs' containers.
type sessions struct {
	*replica
	attach  attachHub          // terminal attach requests waiting for nodelets: leader-local
	streams *connlimit.Streams // the terminal and /apps streams open: leader-local
	apps    appProxy           // the /apps proxy's connections: leader-local
}

// access is the API's credentials: user tokens and node credentials.
type access struct {
	*replica
}
