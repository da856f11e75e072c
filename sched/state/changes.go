package state

import (
	"sync"

	"github.com/hashicorp/go-memdb"
)

// The jobs' change feed: what each committed write did to the jobs
// table, for one reader (the scheduling loop's queue, which keeps the
// pending jobs in priority order between passes and must not read a
// million rows to learn that a few changed). It is memory only, like
// the indexes: no raft entry or snapshot carries it.

// JobChange is one job row's change in one commit: Before is the row
// as it was (nil: a new row), After as it is (nil: deleted). Rows are
// never modified in place, so both stay as they were.
type JobChange struct {
	Before, After *Job
}

// feedCap bounds the changes kept for a reader that has not read them
// (each holds two rows): past it the feed drops them and tells the
// reader to read the whole state.
const feedCap = 1 << 16

// changeFeed is the jobs' changes since the reader's last read.
type changeFeed struct {
	mu      sync.Mutex
	on      bool // a reader has read: keep the changes for it
	lost    bool // changes were dropped (a restore, or past feedCap)
	pending []JobChange
}

// commit commits txn, noting its jobs' changes for the feed's reader
// in the same critical section, so that a reader's snapshot and the
// changes it is given agree (SnapshotChanges).
func (s *Store) commit(txn *memdb.Txn) {
	f := &s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on || f.lost {
		txn.Commit()
		return
	}
	changes := txn.Changes()
	txn.Commit()
	for _, c := range changes {
		if c.Table != tableJobs {
			continue
		}
		ch := JobChange{}
		if c.Before != nil {
			ch.Before = c.Before.(*Job)
		}
		if c.After != nil {
			ch.After = c.After.(*Job)
		}
		f.pending = append(f.pending, ch)
	}
	if len(f.pending) > feedCap {
		f.lost, f.pending = true, nil
	}
}

// commitRestore commits a restore's txn: the whole state changed, so
// the feed's reader must read it all.
func (s *Store) commitRestore(txn *memdb.Txn) {
	f := &s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	txn.Commit()
	f.lost, f.pending = true, nil
}

// SnapshotChanges is a snapshot of the state and the jobs' changes
// committed since the last call, in commit order, up to that snapshot
// exactly. whole is true when the changes are not known (the first
// call, or after a restore or too many changes unread): the caller
// then reads every job of v. The feed has one reader: each call takes
// the changes it answers.
func (s *Store) SnapshotChanges() (v *Snapshot, changes []JobChange, whole bool) {
	f := &s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	v = s.Snapshot()
	whole = !f.on || f.lost
	changes = f.pending
	f.on, f.lost, f.pending = true, false, nil
	if whole {
		changes = nil
	}
	return v, changes, whole
}

// StopChanges stops keeping the changes (the reader no longer reads:
// this server's term as leader has ended); the next SnapshotChanges
// answers the whole state.
func (s *Store) StopChanges() {
	f := &s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on, f.lost, f.pending = false, false, nil
}
