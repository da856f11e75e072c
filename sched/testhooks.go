package sched

import (
	"sync/atomic"

	"github.com/troupe-hpc/troupe/sched/state"
)

// The package's tests step in at three points of the controller: they
// stop the accounting hand-off as a crash would, hold the scheduling
// loop when a pass planned nothing, and count the wakes of a node's
// assignments query. Production never sets these, and no Server carries
// them: a test sets one and clears it when it ends; the hook is given
// the replica it runs for, so that a test watches its own server
// (Server.replica) and not another test's.
var (
	// testHookAfterExport runs between the store's commit and the
	// purge command; an error stops the hand-off there.
	testHookAfterExport atomic.Pointer[func(*replica, []state.PurgeKey) error]
	// testHookIdle runs when a scheduling pass planned nothing, with
	// the state index it planned on, before the loop waits for the next
	// change.
	testHookIdle atomic.Pointer[func(*replica, uint64)]
	// testHookAssignWoke runs each time a node's assignments query
	// reads its index: once on arrival, once per wake.
	testHookAssignWoke atomic.Pointer[func(*replica, string)]
)
