package jobspec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// Limits on arrays.
const (
	// MaxArraySize bounds the elements of one array.
	MaxArraySize = 1_000_000
	// MaxArrayIndex is the highest index an element may have.
	MaxArrayIndex = 1<<31 - 2
	// maxArrayRanges bounds the comma-separated terms of one range.
	maxArrayRanges = 4096
)

// IndexRange is the indices First, First+Step, … up to Last (Last is
// one of them once parsed).
type IndexRange struct {
	First int `json:"first"`
	Last  int `json:"last"`
	Step  int `json:"step"`
}

// Indices are an array's element indices: ranges in ascending order
// that do not overlap, so that the k-th element (in index order) is
// found without listing them.
type Indices []IndexRange

// ParseIndices reads an array's index list in LSF's or Slurm's syntax:
// "1-100", "1,3,5-9:2", "0-15:4", optionally with a throttle "%10"
// (returned as maxRunning, 0 when absent) and LSF's brackets
// ("[1-100%10]").
func ParseIndices(s string) (x Indices, maxRunning int, err error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return nil, 0, fmt.Errorf("array range %q opens '[' without closing it", s)
		}
		s = s[1 : len(s)-1]
	}
	body, throttle, hasThrottle := strings.Cut(s, "%")
	if hasThrottle {
		n, err := strconv.Atoi(strings.TrimSpace(throttle))
		if err != nil || n < 1 {
			return nil, 0, fmt.Errorf("array throttle %%%s: want a whole number of at least 1, the most elements running at once", throttle)
		}
		maxRunning = n
	}
	if strings.TrimSpace(body) == "" {
		return nil, 0, errors.New("array range is empty; want indices such as 1-100 or 1,3,5-9:2")
	}
	terms := strings.Split(body, ",")
	if len(terms) > maxArrayRanges {
		return nil, 0, fmt.Errorf("array range has %d terms; at most %d", len(terms), maxArrayRanges)
	}
	total := 0
	for _, t := range terms {
		r, err := parseIndexRange(strings.TrimSpace(t))
		if err != nil {
			return nil, 0, err
		}
		if n := len(x); n > 0 && r.First <= x[n-1].Last {
			return nil, 0, fmt.Errorf("array range %q: term %s starts at or below %d, where the term before it ends; list indices in ascending order without overlap", s, t, x[n-1].Last)
		}
		x = append(x, r)
		total += r.count()
		if total > MaxArraySize {
			return nil, 0, fmt.Errorf("array range %q has more than %d elements, the most an array may have", s, MaxArraySize)
		}
	}
	return x, maxRunning, nil
}

func parseIndexRange(t string) (IndexRange, error) {
	bad := func(why string) (IndexRange, error) {
		return IndexRange{}, fmt.Errorf("array index term %q: %s; want N, N-M or N-M:STEP with 0 ≤ N ≤ M ≤ %d", t, why, MaxArrayIndex)
	}
	num := func(s string) (int, bool) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		return n, err == nil && n >= 0 && n <= MaxArrayIndex
	}
	span, stepText, hasStep := strings.Cut(t, ":")
	lo, hi, isRange := strings.Cut(span, "-")
	first, ok := num(lo)
	if !ok {
		return bad("not an index")
	}
	r := IndexRange{First: first, Last: first, Step: 1}
	if isRange {
		if r.Last, ok = num(hi); !ok {
			return bad("not an index")
		}
		if r.Last < r.First {
			return bad("the range runs backwards")
		}
	}
	if hasStep {
		st, err := strconv.Atoi(strings.TrimSpace(stepText))
		if err != nil || st < 1 {
			return bad("the step must be a whole number of at least 1")
		}
		if !isRange {
			return bad("a step needs a range")
		}
		r.Step = st
		r.Last = r.First + (r.Last-r.First)/st*st
	}
	return r, nil
}

func (r IndexRange) count() int { return (r.Last-r.First)/r.Step + 1 }

// Count is the number of elements.
func (x Indices) Count() int {
	n := 0
	for _, r := range x {
		n += r.count()
	}
	return n
}

// At is the index of the element at position pos (0-based, in index
// order); -1 when pos is out of range.
func (x Indices) At(pos int) int {
	if pos < 0 {
		return -1
	}
	for _, r := range x {
		if c := r.count(); pos < c {
			return r.First + pos*r.Step
		} else {
			pos -= c
		}
	}
	return -1
}

// Position is the position of index i (the inverse of At); -1 when i is
// not one of x's.
func (x Indices) Position(i int) int {
	pos := 0
	for _, r := range x {
		if i >= r.First && i <= r.Last && (i-r.First)%r.Step == 0 {
			return pos + (i-r.First)/r.Step
		}
		pos += r.count()
	}
	return -1
}

// Contains reports whether i is one of x's indices.
func (x Indices) Contains(i int) bool { return x.Position(i) >= 0 }

// Min and Max are the lowest and highest index (0 for no indices).
func (x Indices) Min() int {
	if len(x) == 0 {
		return 0
	}
	return x[0].First
}

// Max is the highest index.
func (x Indices) Max() int {
	if len(x) == 0 {
		return 0
	}
	return x[len(x)-1].Last
}

// Step is the step of an array of one range with a step, else 1 (LSF's
// LSB_JOBINDEX_STEP, Slurm's SLURM_ARRAY_TASK_STEP).
func (x Indices) Step() int {
	if len(x) == 1 {
		return x[0].Step
	}
	return 1
}

// String is x in the syntax ParseIndices reads: "1-100", "1,3,5-9:2".
func (x Indices) String() string {
	parts := make([]string, len(x))
	for i, r := range x {
		switch {
		case r.First == r.Last:
			parts[i] = strconv.Itoa(r.First)
		case r.Step == 1:
			parts[i] = fmt.Sprintf("%d-%d", r.First, r.Last)
		default:
			parts[i] = fmt.Sprintf("%d-%d:%d", r.First, r.Last, r.Step)
		}
	}
	return strings.Join(parts, ",")
}

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
