package state

import (
	"iter"

	"github.com/hashicorp/go-memdb"
	"github.com/troupe-hpc/troupe/internal/lifecycle"
)

// Iterators over the jobs, for answers that may name every job (GET
// /v1/jobs of an admin's bqueue -u all): each yields the rows as it
// reads them off the snapshot's index, in id order, so that an answer
// written as it goes never holds the list, however many jobs the state
// keeps. The snapshot is a fixed version of the tables: a change applied
// meanwhile is not seen, and nothing is skipped or seen twice.

// EachJob yields every job in id order.
func (v *jobReads) EachJob() iter.Seq[*Job] { return v.each("id") }

// EachJobOf yields the jobs of users (by name, each named once), in id
// order.
func (v *jobReads) EachJobOf(users ...string) iter.Seq[*Job] {
	seqs := make([]iter.Seq[*Job], len(users))
	for i, u := range users {
		seqs[i] = v.each("user", u)
	}
	return mergeByID(seqs)
}

// EachJobIn yields the jobs in any of states (each named once), in id
// order.
func (v *jobReads) EachJobIn(states ...lifecycle.JobState) iter.Seq[*Job] {
	seqs := make([]iter.Seq[*Job], len(states))
	for i, st := range states {
		seqs[i] = v.each("state", string(st))
	}
	return mergeByID(seqs)
}

// EachElementOf yields the rows of job array id's elements (those made
// and not purged), in index order.
func (v *jobReads) EachElementOf(id uint64) iter.Seq[*Job] { return v.each("element_prefix", id) }

// EachLiveJob yields the jobs that have not ended, in id order.
func (v *jobReads) EachLiveJob() iter.Seq[*Job] { return v.EachJobIn(liveStates...) }

// each yields the rows of the jobs index named index that args pick.
func (v *jobReads) each(index string, args ...any) iter.Seq[*Job] {
	return func(yield func(*Job) bool) {
		it, err := v.txn.Get(tableJobs, index, args...)
		if err != nil {
			panic(err)
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			if !yield(raw.(*Job)) {
				return
			}
		}
	}
}

// jobsBy collects the rows of the jobs index named index that args
// pick, in the index's order, within txn.
func jobsBy(txn *memdb.Txn, index string, args ...any) ([]*Job, error) {
	it, err := txn.Get(tableJobs, index, args...)
	if err != nil {
		return nil, err
	}
	var out []*Job
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*Job))
	}
	return out, nil
}

// mergeByID merges runs each in id order (and disjoint) into one in id
// order, holding one row of each run at a time.
func mergeByID(seqs []iter.Seq[*Job]) iter.Seq[*Job] {
	if len(seqs) == 1 {
		return seqs[0]
	}
	return func(yield func(*Job) bool) {
		next := make([]func() (*Job, bool), len(seqs))
		head := make([]*Job, len(seqs))
		for i, s := range seqs {
			var stop func()
			next[i], stop = iter.Pull(s)
			defer stop()
			head[i], _ = next[i]()
		}
		for {
			k := -1
			for i, j := range head {
				if j != nil && (k < 0 || j.ID < head[k].ID) {
					k = i
				}
			}
			if k < 0 || !yield(head[k]) {
				return
			}
			head[k], _ = next[k]()
		}
	}
}
