package state

import (
	"errors"

	"github.com/hashicorp/go-memdb"
)

// Purge (the act) drops ended jobs the leader has exported to the
// accounting store (accounting): it is the store's acknowledgement,
// committed only after the store holds the jobs durably.

// PurgeKey names one exported run of an ended job.
type PurgeKey struct {
	JobID uint64 `json:"job_id"`
	Run   int    `json:"run"` // the job's Requeues when exported
}

// lastIDEntry is the indexes table's row that keeps the highest job id
// ever given once jobs leave the table, so that ids are never reused.
const lastIDEntry = "last-job-id"

// purge deletes each named job that is still there, ended and at the
// named run; any other (a job requeued since, an unknown id) is left.
func purge(txn *memdb.Txn, keys []PurgeKey) error {
	if len(keys) == 0 {
		return errors.New("purge names no job")
	}
	last, err := lastJobID(txn)
	if err != nil {
		return err
	}
	for _, k := range keys {
		raw, err := txn.First(tableJobs, "id", k.JobID)
		if err != nil {
			return err
		}
		if raw == nil {
			continue
		}
		j := raw.(*Job)
		if !j.State.Terminal() || j.Requeues != k.Run {
			continue
		}
		if err := txn.Delete(tableJobs, j); err != nil {
			return err
		}
	}
	return txn.Insert(tableIndexes, &indexEntry{Table: lastIDEntry, Index: last})
}

// lastJobID is the highest job id given: the jobs table's last, or the
// high-water mark kept when purges emptied its end.
func lastJobID(txn *memdb.Txn) (uint64, error) {
	var last uint64
	raw, err := txn.Last(tableJobs, "id")
	if err != nil {
		return 0, err
	}
	if raw != nil {
		last = raw.(*Job).ID
	}
	raw, err = txn.First(tableIndexes, "id", lastIDEntry)
	if err != nil {
		return 0, err
	}
	if raw != nil {
		last = max(last, raw.(*indexEntry).Index)
	}
	return last, nil
}

// raiseLastJobID raises the highest job id given to id, when id is above
// it by at most maxIDJump.
func raiseLastJobID(txn *memdb.Txn, id uint64) error {
	last, err := lastJobID(txn)
	if err != nil || id <= last || id-last > maxIDJump {
		return err
	}
	return txn.Insert(tableIndexes, &indexEntry{Table: lastIDEntry, Index: id})
}
