// Package sched is schedd, the queue controller. Read this first.
//
//		bsub/bqueue/bkill/nodelets ──HTTP/JSON /v1──► httpapi ──Controller──► Server
//		                                                 │ reads: state.Snapshot (memdb), blocking on watch sets
//		                                                 │ writes: state.Command
//		                                                 ▼
//		                                  raftlog.Log.Apply ── bbolt fsync ──► FSM ──► state.Store.Apply
//		                                                 ▲
//		scheduler loop (loop.go), leader only:           │ state.Plan
//		  snapshot + now ──► core.Schedule (pure) ───────┘
//
//		 1. A client's write (submit, kill, node register, container report)
//		    becomes a state.Command. The Server stamps it with the leader's time
//		    and hands it to raft; it answers only once the entry is on disk and
//		    applied, so an acknowledged job survives a crash.
//		 2. Every replica applies the same entries to its memdb store in the same
//		    order; Apply is deterministic (ids, times and UUIDs come in the
//		    command, not from the replica).
//		 3. The scheduler loop wakes on any state change (or at the next
//		    walltime end, the next usage charge, every few seconds: when is
//		    loopMachine's to decide, a state machine stepped by events and
//		    ticked by the clock, loop.go), builds a core.Snapshot (free
//		    resources per node, the queue in order), calls core.Schedule and
//		    commits the plan it returns. Placement is gang: all containers of
//		    a session or none.
//		 4. Nodelets long-poll their assignments (a blocking query on the
//		    node's own index: state.Snapshot.NodeIndex, woken only by changes
//		    to the jobs placed on it, not by the echo of its own reports),
//		    run the containers, and report their
//		    states; the store derives each job's state from its containers'
//		    (state.advance).
//
//	 5. Node failure (nodefail.go): the leader notes every heartbeat and
//	    assignments query; a node silent past Config.NodeTimeout is marked
//	    DOWN through raft (state.NodesDown). Its jobs end NODE_FAIL, or
//	    go back to PENDING (containers unplaced, Requeues counted) when the
//	    job file or the partition says requeue; their resources are free at
//	    once. A DOWN node heard from again is marked UP (CmdNodeUp); its
//	    assignments no longer hold those jobs, so its nodelet stops them.
//	 6. Identity (internal/auth) and who may do what: unix-socket callers
//	    carry their peer credentials, TCP callers a bearer token;
//	    sched/httpapi decides from its route table who may call each
//	    route (the nodes' endpoints for that node, reconfig, drain and
//	    snapshots for admins) and redacts others' jobs; what depends on
//	    the data is decided here, once: a job's owner or an admin may
//	    kill, hold, release, signal, attach to it or reach its services
//	    (authz.go, mayControl), a token's owner or an admin may see and
//	    revoke it (tokens.go).
//	 7. Holds, dependencies and drains: where the core's snapshot is
//	    built (snapshot.go), held jobs go to the core as Held, a pending
//	    job's dependency (bsub -w, depend.go) with the state of the jobs
//	    it names (core.Snapshot.Named), and the core decides Held,
//	    Dependency, DependencyNeverSatisfied and PartitionLimit itself;
//	    a drained node (badmin drain, drain.go) is left out of its nodes
//	    (nodeCache.open).
//	 8. Snapshot files (snapfile.go): GET/POST /v1/snapshot stream the FSM
//	    state with a sha256 header, then the accounting store's records
//	    (accounting.Backup); a restore is checked whole, and the live
//	    store compared with it, before the store gets the records it
//	    lacks and raft installs the state on every replica.
//	 9. The policy (core.DefaultPolicy, the "fairshare" policy of
//	    partitions.hcl; docs/scheduling.md): the head of the queue holds
//	    a reservation until it starts, which backfill and jobs of higher
//	    priority submitted later may not delay. The head is the oldest
//	    job pending past its partition's starvation_threshold (default
//	    6h), else the job of highest priority (fair share, age, size,
//	    tier). The core keeps no state: a job whose Reason is Resources
//	    held the reservation in the last pass and keeps it; the
//	    partitions' thresholds come in core.Partition.StarvationAge.
//	    bsim replays traces through the same code (bsim --compare easy);
//	    TestReplayMatchesBsim runs short traces through a real Server with
//	    simulated nodes on a fake clock and checks every start against
//	    bsim's (the loop's idle hook, testHookIdle, holds it between the
//	    trace's events).
//	10. The web page (httpapi.API.ReadOnly, package web; schedd --web-addr): an
//	    unauthenticated listener serving an embedded page and the GET
//	    endpoints of jobs, nodes, partitions and fair share only, every
//	    caller Anonymous (others' jobs redacted for all).
//	 9. Ended jobs leave raft (export.go, package accounting): every server
//	    writes the ended jobs it applies to its accounting store (SQLite,
//	    idempotent by job id and run); the leader, once a job ended
//	    Config.KeepEnded ago and its own store holds it, commits
//	    state.Purge, and every replica drops it. bhist and bacct (GET
//	    /v1/history, /v1/accounting; history.go) read the store and the
//	    ended jobs still in raft, each run once.
//	11. Job arrays (state/array.go): one submit command and one row per
//	    array whatever its size; the store gives elements rows of their
//	    own (ordinary jobs, ids from the job counter) a window at a time
//	    and keeps the array's counts and state. Here the array's row is
//	    never queued; its max_running reaches the core as ArraySlots
//	    (snapshot.go), and answers name elements 12[5]
//	    (api.ParseJobRef, state.Snapshot.ElementView). Elements are exported to
//	    the accounting store one by one with their index; the array's
//	    row leaves raft with them.
//	12. Rows and views (view.go): the store holds rows (state.Job,
//	    state.Node), only what is replicated; every answer is a view
//	    (api.Job, api.Node, api.AssignedJob for nodelets) built in
//	    view.go, where the leader adds its last pass's start estimate,
//	    priority and queue position (jobExtras) and the node list its
//	    derived allocation. Nothing derived is ever written to a row.
//
// The HTTP layer is sched/httpapi: handlers, routes, authentication,
// the rules of who may call what and the mapping of errors to statuses.
// The Server implements its Controller (controller.go), answering views
// built in view.go; Handler, TCPHandler, ReadOnlyHandler and
// CatchUpGate build it, so callers need not import it.
//
// Subpackages: core (the pure scheduler), state (tables and transitions),
// raftlog (durability), httpapi (the HTTP layer), fault (the kinds of
// error httpapi maps to statuses), web (the read-only page), config
// (schedd.hcl), accounting (the store of ended jobs).
//
// It must not import nodelet/... or internal/client: nodes are reached
// over HTTP only, and the scheduling decisions themselves stay in
// sched/core. No handler lives here: a route belongs in sched/httpapi.
package sched
