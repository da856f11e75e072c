package state

import (
	"errors"
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/troupe-hpc/troupe/sched/admission"
)

// checkDependency asks admission's dependency rule again at commit, of
// the jobs before j in the log: ids are given in log order, so one at or
// past the new job's id is one a concurrent submission could not have
// meant. A job it names that is missing is ErrNotFound.
func checkDependency(txn *memdb.Txn, j *Job) error {
	if j.DependsOn == nil {
		return nil
	}
	err := admission.CheckDependency(j.DependsOn, commitJobs{txn: txn, next: j.ID})
	if errors.Is(err, admission.ErrNoJob) {
		return fmt.Errorf("%w: %w", err, ErrNotFound)
	}
	return err
}

// commitJobs is the jobs before next, as admission looks them up.
type commitJobs struct {
	txn  *memdb.Txn
	next uint64
}

func (c commitJobs) Target(id uint64) (admission.Target, bool) {
	if id >= c.next {
		return admission.Target{}, false
	}
	raw, err := c.txn.First(tableJobs, "id", id)
	if err != nil || raw == nil {
		return admission.Target{}, false
	}
	o := raw.(*Job)
	if o.Array == nil {
		return admission.Target{}, true
	}
	return admission.Target{Array: true, Indices: o.Array.Indices}, true
}

func (c commitJobs) LastJobID() uint64 { return c.next - 1 }
