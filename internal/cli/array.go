package cli

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/troupe-hpc/troupe/internal/api"
)

// JobID is how the commands show a job: "42"; an element of a job array
// "12[5]"; a job array's own row "12[1-100]".
func JobID(j api.Job) string {
	switch {
	case j.ArrayID != 0:
		return j.Ref()
	case j.Array != nil:
		return fmt.Sprintf("%d[%s]", j.ID, j.Array.Indices)
	}
	return strconv.FormatUint(j.ID, 10)
}

// ArrayCounts is a job array's elements by state, in LSF's words as
// bjobs -A counts them ("RUN 10 PEND 88 DONE 2", states none is in left
// out): "" for a job that is not an array.
func ArrayCounts(j api.Job) string {
	if j.Array == nil {
		return ""
	}
	count := map[string]int{}
	for s, n := range j.Array.States {
		count[LSFState(api.Job{State: s})] += n
	}
	var parts []string
	for _, name := range []string{LSFRun, LSFPend, LSFPSusp, LSFDone, LSFExit} {
		if n := count[name]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", name, n))
		}
	}
	return strings.Join(parts, " ")
}

// FoldArrays leaves out the elements of job arrays: an array shows as
// its own row, with its counts (bqueue without --array).
func FoldArrays(jobs []api.Job) []api.Job {
	out := jobs[:0:0]
	for _, j := range jobs {
		if j.ArrayID == 0 {
			out = append(out, j)
		}
	}
	return out
}

// compareIDs orders jobs by id, an array's elements after their array
// by index.
func compareIDs(a, b api.Job) int {
	ka, ia := a.ID, -1
	if a.ArrayID != 0 {
		ka, ia = a.ArrayID, a.ArrayIndex
	}
	kb, ib := b.ID, -1
	if b.ArrayID != 0 {
		kb, ib = b.ArrayID, b.ArrayIndex
	}
	if c := cmp.Compare(ka, kb); c != 0 {
		return c
	}
	return cmp.Compare(ia, ib)
}

// LSFArrays is jobs as LSF's bjobs shows job arrays: each element as a
// job of the array's id named name[index] ("sweep[5]"), and the array's
// own row, named name[indices], only while some of its elements have not
// come up yet (they wait behind it).
func LSFArrays(jobs []api.Job) []api.Job {
	out := jobs[:0:0]
	for _, j := range jobs {
		switch {
		case j.ArrayID != 0:
			j.Name = fmt.Sprintf("%s[%d]", j.Name, j.ArrayIndex)
			j.ID = j.ArrayID
		case j.Array != nil:
			if j.Array.Unmade() == 0 {
				continue
			}
			j.Name = fmt.Sprintf("%s[%s]", j.Name, j.Array.Indices)
		}
		out = append(out, j)
	}
	return out
}
