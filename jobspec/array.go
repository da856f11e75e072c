package jobspec

import (
	"strings"

	"github.com/troupe-hpc/troupe/internal/arrayindex"
)

// Array makes a job a job array: one job submitted once whose elements
// each run as a full cluster session of their own, told apart by their
// index (LSF's bsub -J "name[1-100%10]", Slurm's --array=1-100%10). In a
// job file:
//
//	array {
//	  range       = "1-100"   # or "1,3,5-9:2": indices, lists and steps
//	  max_running = 10        # at most this many elements run at once; 0 no limit
//	}
type Array struct {
	Range      string `json:"range"`
	MaxRunning int    `json:"max_running,omitempty"`
}

// Limits on arrays (package arrayindex's).
const (
	MaxArraySize  = arrayindex.MaxSize
	MaxArrayIndex = arrayindex.MaxIndex
)

// IndexRange and Indices are package arrayindex's: the replicated
// state stores an array's indices in that form too.
type (
	IndexRange = arrayindex.IndexRange
	Indices    = arrayindex.Indices
)

// ParseIndices reads an array's index list in LSF's or Slurm's syntax
// (arrayindex.Parse).
func ParseIndices(s string) (x Indices, maxRunning int, err error) { return arrayindex.Parse(s) }

// SplitArrayName splits LSF's array job name "sweep[1-100]%10" (the
// throttle after the brackets, as bsub(1) writes it) or
// "sweep[1-100%10]" into the name "sweep" and the range "1-100%10"; ok
// is false for a name without brackets.
func SplitArrayName(name string) (base, rng string, ok bool) {
	open := strings.IndexByte(name, '[')
	if open < 0 {
		return name, "", false
	}
	body, throttle := name, ""
	if i := strings.LastIndexByte(name, ']'); i > open && i < len(name)-1 && name[i+1] == '%' {
		body, throttle = name[:i+1], name[i+1:]
	}
	if !strings.HasSuffix(body, "]") {
		return name, "", false
	}
	return name[:open], body[open+1:len(body)-1] + throttle, true
}

// ArrayFromSpec reads an array request as bsub and script directives
// give it ("1-100:2%10"): the range with the throttle split off into
// MaxRunning.
func ArrayFromSpec(s string) (*Array, error) {
	x, maxRunning, err := ParseIndices(s)
	if err != nil {
		return nil, err
	}
	return &Array{Range: x.String(), MaxRunning: maxRunning}, nil
}

// Indices parses the array's range (Validate has checked it).
func (a *Array) Indices() (Indices, error) {
	x, _, err := ParseIndices(a.Range)
	return x, err
}
