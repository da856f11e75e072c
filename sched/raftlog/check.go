package raftlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// ErrDamaged marks a data dir whose raft log or snapshots cannot be read
// back. schedd refuses to start on one rather than replay around a hole;
// schedd(8), RECOVERY, says how to recover.
var ErrDamaged = errors.New("raft data damaged")

// recoverHint ends every ErrDamaged message.
const recoverHint = "schedd will not start on a damaged log: restore this server from a peer or a snapshot (see RECOVERY in schedd(8))"

// openStores opens raft.db and the snapshots in dir and reads every log
// entry and the newest snapshot back before raft sees them: a damaged
// file is an ErrDamaged naming it (and the entry), never a panic in
// raft's replay or a skipped entry.
// lastCmd is the index of the last command entry in the log (0 none).
func openStores(dir string, logOut io.Writer) (bolt *raftboltdb.BoltStore, snaps *raft.FileSnapshotStore, lastCmd uint64, err error) {
	path := filepath.Join(dir, "raft.db")
	err = guard(func() (err error) {
		bolt, err = raftboltdb.New(raftboltdb.Options{Path: path})
		return err
	})
	if err != nil {
		return nil, nil, 0, damaged(path, err)
	}
	snaps, err = raft.NewFileSnapshotStore(dir, 2, logOut)
	if err != nil {
		bolt.Close()
		return nil, nil, 0, fmt.Errorf("opening snapshots in %s: %w", dir, err)
	}
	snapIndex, err := checkSnapshot(snaps)
	if err != nil {
		bolt.Close()
		return nil, nil, 0, damaged(filepath.Join(dir, "snapshots"), err)
	}
	if lastCmd, err = checkLog(bolt, snapIndex); err != nil {
		bolt.Close()
		return nil, nil, 0, damaged(path, err)
	}
	return bolt, snaps, lastCmd, nil
}

func damaged(path string, err error) error {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	return fmt.Errorf("%w: %s: %v; %s", ErrDamaged, path, err, recoverHint)
}

// checkLog reads every entry of the log and decodes every command; it
// answers the index of the last command. An entry at or below snapIndex,
// the newest snapshot's, may be missing: the snapshot holds it (a
// restored backup takes the index after the log's last entry and writes
// no entry there), and raft replays only the entries after it.
func checkLog(bolt *raftboltdb.BoltStore, snapIndex uint64) (lastCmd uint64, err error) {
	err = guard(func() error {
		first, err := bolt.FirstIndex()
		if err != nil {
			return err
		}
		last, err := bolt.LastIndex()
		if err != nil {
			return err
		}
		if _, err := bolt.GetUint64([]byte("CurrentTerm")); err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
			return fmt.Errorf("reading the current term: %w", err)
		}
		if first == 0 {
			return nil
		}
		var e raft.Log
		for i := first; i <= last; i++ {
			if err := bolt.GetLog(i, &e); err != nil {
				if i <= snapIndex && errors.Is(err, raft.ErrLogNotFound) {
					continue
				}
				return fmt.Errorf("entry %d: %w", i, err)
			}
			if e.Index != i {
				return fmt.Errorf("entry %d: stored as index %d", i, e.Index)
			}
			if e.Type != raft.LogCommand {
				continue
			}
			if _, err := decodeCommand(e.Data); err != nil {
				return fmt.Errorf("entry %d: %w", i, err)
			}
			lastCmd = i
		}
		return nil
	})
	return lastCmd, err
}

// checkSnapshot reads the newest snapshot through, which checks its CRC,
// and answers its index (0: none).
func checkSnapshot(snaps *raft.FileSnapshotStore) (uint64, error) {
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return 0, err
	}
	return list[0].Index, guard(func() error {
		_, rc, err := snaps.Open(list[0].ID)
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", list[0].ID, err)
		}
		return rc.Close()
	})
}

// guard runs f, turning a panic or a memory fault (bbolt reads its file
// through mmap: a truncated file faults) into an error.
func guard(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("unreadable (%v)", p)
		}
	}()
	return f()
}
