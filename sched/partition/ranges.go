package partition

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// MaxExpand bounds how many names one node pattern may expand to.
const MaxExpand = 65536

// ErrRange marks a node pattern that is not a valid name or range.
var ErrRange = errors.New("invalid node range")

// Expand turns a node pattern into the names it stands for, as Slurm's
// hostlists do: "gpu[01-03]" is gpu01, gpu02, gpu03; "n[1-2,5]" is n1,
// n2, n5; "r[1-2]n[1-2]" is r1n1, r1n2, r2n1, r2n2. A bound written with
// a leading zero sets the width of every number of its range. A pattern
// without brackets is one name. The error wraps ErrRange.
func Expand(pattern string) ([]string, error) {
	out := []string{""}
	rest := pattern
	for rest != "" {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			if strings.IndexByte(rest, ']') >= 0 {
				return nil, fmt.Errorf("%w: %q has a ] without [", ErrRange, pattern)
			}
			out = suffixAll(out, []string{rest})
			break
		}
		lit := rest[:open]
		if strings.IndexByte(lit, ']') >= 0 {
			return nil, fmt.Errorf("%w: %q has a ] without [", ErrRange, pattern)
		}
		end := strings.IndexByte(rest[open:], ']')
		if end < 0 {
			return nil, fmt.Errorf("%w: %q has a [ without ]", ErrRange, pattern)
		}
		nums, err := expandBracket(rest[open+1 : open+end])
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrRange, pattern, err)
		}
		if len(out)*len(nums) > MaxExpand {
			return nil, fmt.Errorf("%w: %q stands for more than %d names", ErrRange, pattern, MaxExpand)
		}
		out = suffixAll(suffixAll(out, []string{lit}), nums)
		rest = rest[open+end+1:]
	}
	for _, n := range out {
		if !validNodeName(n) {
			return nil, fmt.Errorf("%w: %q is not a node name (letters, digits, '.', '_' and '-')", ErrRange, n)
		}
	}
	return out, nil
}

// expandBracket reads "01-16,20,30-31".
func expandBracket(s string) ([]string, error) {
	if s == "" {
		return nil, errors.New("empty brackets")
	}
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.ParseUint(lo, 10, 32)
		b, err2 := strconv.ParseUint(hi, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%q is not a number or a range such as 01-16", item)
		}
		if a > b {
			return nil, fmt.Errorf("range %s runs backwards", item)
		}
		if b-a >= MaxExpand || len(out)+int(b-a) >= MaxExpand {
			return nil, fmt.Errorf("range %s is longer than %d", item, MaxExpand)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
	}
	return out, nil
}

func suffixAll(heads, tails []string) []string {
	out := make([]string, 0, len(heads)*len(tails))
	for _, h := range heads {
		for _, t := range tails {
			out = append(out, h+t)
		}
	}
	return out
}

func validNodeName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// isGlob reports whether a node pattern is a shell glob ("cpu*", "*").
func isGlob(p string) bool { return strings.ContainsAny(p, "*?") }

// pathMatch checks that a glob is well formed.
func pathMatch(p string) (bool, error) { return path.Match(p, "") }
