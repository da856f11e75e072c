package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/arrayindex"
)

// SlurmJobID is a job's id as squeue's %i and sacct's JobID write it: an
// element of a job array "ARRAYID_INDEX" ("3_1"), a job array's own row
// (the elements not made yet) "ARRAYID_[INDICES%MAX]" ("3_[3-4%2]"; one
// index alone "3_4"), any other job its id.
func SlurmJobID(j api.Job) string {
	switch {
	case j.ArrayID != 0:
		return fmt.Sprintf("%d_%d", j.ArrayID, j.ArrayIndex)
	case j.Array != nil:
		rest := UnmadeIndices(j.Array)
		if len(rest) == 1 && rest[0].First == rest[0].Last && j.Array.MaxRunning == 0 {
			return fmt.Sprintf("%d_%d", j.ID, rest[0].First)
		}
		s := rest.String()
		if j.Array.MaxRunning > 0 {
			s += "%" + strconv.Itoa(j.Array.MaxRunning)
		}
		return fmt.Sprintf("%d_[%s]", j.ID, s)
	}
	return strconv.FormatUint(j.ID, 10)
}

// UnmadeIndices are the indices of a's elements that have no job row
// yet: every index from position a.Next on, but for those that got one
// early (a.Early).
func UnmadeIndices(a *api.Array) arrayindex.Indices {
	early := map[int]bool{}
	for _, i := range a.Early {
		early[i] = true
	}
	var out arrayindex.Indices
	pos := 0
	for _, r := range a.Indices {
		n := (r.Last-r.First)/r.Step + 1
		open := false
		for k := range n {
			idx := r.First + k*r.Step
			if pos+k < a.Next || early[idx] {
				open = false
				continue
			}
			if open {
				out[len(out)-1].Last = idx
				continue
			}
			out = append(out, arrayindex.IndexRange{First: idx, Last: idx, Step: r.Step})
			open = true
		}
		pos += n
	}
	for i := range out {
		if out[i].First == out[i].Last {
			out[i].Step = 1
		}
	}
	return out
}

// SlurmArrays is jobs as Slurm's squeue and sacct show job arrays: each
// element as a job of its own (SlurmJobID "3_1"), and the array's own
// row only while some elements have no row yet, standing for them
// (PENDING, or held while the array is).
func SlurmArrays(jobs []api.Job) []api.Job {
	out := jobs[:0:0]
	for _, j := range jobs {
		if j.Array != nil {
			if j.Array.Unmade() <= 0 {
				continue
			}
			j.State, j.Reason = api.JobPending, ""
			if j.Array.Held {
				j.State, j.Reason = api.JobHeld, api.ReasonHeld
			}
			j.Started, j.Ended, j.Containers = time.Time{}, time.Time{}, nil
		}
		out = append(out, j)
	}
	return out
}

// SlurmArrayJobID is squeue's %F (ArrayJobID): an element's array id,
// any other job's own id.
func SlurmArrayJobID(j api.Job) string {
	if j.ArrayID != 0 {
		return strconv.FormatUint(j.ArrayID, 10)
	}
	return strconv.FormatUint(j.ID, 10)
}

// SlurmArrayTaskID is squeue's %K (ArrayTaskID): an element's index, the
// indices an array's own row stands for, "N/A" for another job.
func SlurmArrayTaskID(j api.Job) string {
	switch {
	case j.ArrayID != 0:
		return strconv.Itoa(j.ArrayIndex)
	case j.Array != nil:
		s := UnmadeIndices(j.Array).String()
		if j.Array.MaxRunning > 0 {
			s += "%" + strconv.Itoa(j.Array.MaxRunning)
		}
		return s
	}
	return "N/A"
}

// SlurmArrayElements is jobs (SlurmArrays's) with each job array's own
// row, the elements not come up yet, written out as one row per element
// (squeue -r): "3_3", "3_4", each pending (or held).
func SlurmArrayElements(jobs []api.Job) []api.Job {
	out := jobs[:0:0]
	for _, j := range jobs {
		if j.Array == nil {
			out = append(out, j)
			continue
		}
		for _, r := range UnmadeIndices(j.Array) {
			for i := r.First; i <= r.Last; i += r.Step {
				e := j
				e.Array, e.ArrayID, e.ArrayIndex = nil, j.ID, i
				out = append(out, e)
			}
		}
	}
	return out
}
