package state

import (
	"fmt"
	"strconv"

	"github.com/hashicorp/go-memdb"
)

// checkDependency checks at commit that the jobs j's dependency names
// are jobs before j in the log (admission checked the same of the state
// it saw, and the dependency's form): ids are given in log order, so one
// at or past the new job's id is one a concurrent submission could not
// have meant. A job it names that is missing is ErrNotFound; an element
// of a job that is no array, or that its array lacks, is refused.
func checkDependency(txn *memdb.Txn, j *Job) error {
	if j.DependsOn == nil {
		return nil
	}
	for _, c := range j.DependsOn.Conditions {
		var o *Job
		if c.JobID < j.ID {
			if raw, err := txn.First(tableJobs, "id", c.JobID); err == nil && raw != nil {
				o = raw.(*Job)
			}
		}
		switch {
		case o == nil:
			return fmt.Errorf("dependency %s: job %d does not exist (the last job is %d): %w", c, c.JobID, j.ID-1, ErrNotFound)
		case c.Index != nil && o.Array == nil:
			return fmt.Errorf("dependency %s: job %d is not a job array", c, c.JobID)
		case c.Index != nil && !o.Array.Indices.Contains(*c.Index):
			return fmt.Errorf("dependency %s: array %d has no element %d (its indices: %s)", c, c.JobID, *c.Index, o.Array.Indices)
		}
	}
	return nil
}

// String is the condition as LSF writes it: "done(12)", "done(12[5])".
func (c Condition) String() string {
	ref := strconv.FormatUint(c.JobID, 10)
	if c.Index != nil {
		ref = fmt.Sprintf("%d[%d]", c.JobID, *c.Index)
	}
	return c.Kind + "(" + ref + ")"
}
