package admission

import (
	"errors"
	"fmt"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
)

// Target is what a dependency may name of a job: whether it is a job
// array, and its indices if so.
type Target struct {
	Array   bool
	Indices jobspec.Indices
}

// Jobs is how CheckDependency looks jobs up.
type Jobs interface {
	// Target is the job id, false when there is none a dependency may
	// name.
	Target(id uint64) (Target, bool)
	// LastJobID is the highest job id given so far.
	LastJobID() uint64
}

// ErrNoJob marks a dependency on a job that does not exist.
var ErrNoJob = errors.New("no such job")

// noJob is an ErrNoJob in its own words.
type noJob struct{ msg string }

func (e noJob) Error() string        { return e.msg }
func (e noJob) Is(target error) bool { return target == ErrNoJob }

// CheckDependency refuses a dependency that is malformed
// (api.Dependency.Validate: conditions, kinds, ids) or names a job that
// does not exist, or an element a job array lacks. Submit asks it of
// the state it admits on; the state's apply asks it again at commit,
// where a job is one before the new one's id.
func CheckDependency(d *api.Dependency, jobs Jobs) error {
	if err := d.Validate(); err != nil {
		return err
	}
	for _, c := range d.Conditions {
		t, ok := jobs.Target(c.JobID)
		switch {
		case !ok:
			return noJob{fmt.Sprintf("dependency %s: job %d does not exist (the last job is %d)", c, c.JobID, jobs.LastJobID())}
		case c.Index != nil && !t.Array:
			return fmt.Errorf("dependency %s: job %d is not a job array", c, c.JobID)
		case c.Index != nil && !t.Indices.Contains(*c.Index):
			return fmt.Errorf("dependency %s: array %d has no element %d (its indices: %s)", c, c.JobID, *c.Index, t.Indices)
		}
	}
	return nil
}
