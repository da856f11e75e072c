package raftlog

import (
	"errors"
	"fmt"
	"github.com/troupe-hpc/troupe/sched/fault"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// ErrDiskFull marks a write refused because the data dir's file system
// is full (or over quota): nothing was committed; the write may be sent
// again once space is freed. The API answers it 507.
var ErrDiskFull = fault.ErrDiskFull

// store is raft's log and stable store (bbolt) with its out-of-space
// errors made ErrDiskFull and remembered until a write succeeds again,
// so that Apply answers "data dir full" at once instead of raft's
// "not the leader" after the step-down a failed write causes.
type store struct {
	*raftboltdb.BoltStore
	dir  string
	mu   sync.Mutex
	full error
	stop chan struct{} // closed by Close: a blocked term write gives up
}

func (s *store) note(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.full = nil
		return nil
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		s.full = fmt.Errorf("%w: %s: %v; free space there (the write was not committed)", ErrDiskFull, s.dir, err)
		return s.full
	}
	return err
}

// diskFull is the last write's out-of-space error (nil when it fitted).
func (s *store) diskFull() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full
}

func (s *store) StoreLog(l *raft.Log) error { return s.note(s.BoltStore.StoreLog(l)) }

func (s *store) StoreLogs(l []*raft.Log) error { return s.note(s.BoltStore.StoreLogs(l)) }

func (s *store) Set(k, v []byte) error { return s.note(s.BoltStore.Set(k, v)) }

// SetUint64 stores a term or a vote. raft panics when it cannot store
// its current term; on a full disk the write is retried until space is
// freed (raft waits, writes are refused with ErrDiskFull meanwhile), and
// after Close it waits for the process to exit.
func (s *store) SetUint64(k []byte, v uint64) error {
	for {
		err := s.note(s.BoltStore.SetUint64(k, v))
		if err == nil || !errors.Is(err, ErrDiskFull) || string(k) != "CurrentTerm" {
			return err
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-s.stop:
			select {} // raft would panic on the error; the process is exiting
		}
	}
}
