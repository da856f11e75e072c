package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
)

// checkDependency refuses a dependency on a job that does not exist (yet):
// ids are given in log order, so one at or past the new job's id is one
// a concurrent submission could not have meant.
func checkDependency(txn *memdb.Txn, j *Job) error {
	if j.DependsOn == nil {
		return nil
	}
	if err := j.DependsOn.Validate(); err != nil {
		return err
	}
	for _, c := range j.DependsOn.Conditions {
		raw, err := txn.First(tableJobs, "id", c.JobID)
		if err != nil {
			return err
		}
		if raw == nil || c.JobID >= j.ID {
			return fmt.Errorf("dependency %s: job %d: %w", c, c.JobID, ErrNotFound)
		}
	}
	return nil
}
