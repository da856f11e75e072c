// Package arrayindex holds a job array's element indices: ranges in
// ascending order that do not overlap, so that the k-th element (in
// index order) is found without listing them. Job files (package jobspec
// parses the syntax), the replicated state and the API share the form;
// it is a leaf that imports nothing of troupe's.
package arrayindex

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Limits on arrays.
const (
	// MaxSize bounds the elements of one array.
	MaxSize = 1_000_000
	// MaxIndex is the highest index an element may have.
	MaxIndex = 1<<31 - 2
	// maxRanges bounds the comma-separated terms of one range.
	maxRanges = 4096
)

// Parse reads an array's index list in LSF's or Slurm's syntax:
// "1-100", "1,3,5-9:2", "0-15:4", optionally with a throttle "%10"
// (returned as maxRunning, 0 when absent) and LSF's brackets
// ("[1-100%10]").
func Parse(s string) (x Indices, maxRunning int, err error) {
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
	if len(terms) > maxRanges {
		return nil, 0, fmt.Errorf("array range has %d terms; at most %d", len(terms), maxRanges)
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
		total += r.Count()
		if total > MaxSize {
			return nil, 0, fmt.Errorf("array range %q has more than %d elements, the most an array may have", s, MaxSize)
		}
	}
	return x, maxRunning, nil
}

func parseIndexRange(t string) (IndexRange, error) {
	bad := func(why string) (IndexRange, error) {
		return IndexRange{}, fmt.Errorf("array index term %q: %s; want N, N-M or N-M:STEP with 0 ≤ N ≤ M ≤ %d", t, why, MaxIndex)
	}
	num := func(s string) (int, bool) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		return n, err == nil && n >= 0 && n <= MaxIndex
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

// Count is the number of indices in r.
func (r IndexRange) Count() int { return (r.Last-r.First)/r.Step + 1 }

// Count is the number of elements.
func (x Indices) Count() int {
	n := 0
	for _, r := range x {
		n += r.Count()
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
		if c := r.Count(); pos < c {
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
		pos += r.Count()
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

// String is x in the syntax Parse reads: "1-100", "1,3,5-9:2".
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
