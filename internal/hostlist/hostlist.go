// Package hostlist reads and writes Slurm's ranged host lists,
// "main1,sub[1-3]", as SLURM_JOB_NODELIST and squeue's NODELIST hold them.
//
// It imports no troupe package.
package hostlist

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The regexps here are compiled on first use, not at the start of every
// command that links this package (bsub starts in a few milliseconds).
var hostNum = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(.*?)([0-9]+)$`) })

// Compress writes hosts as Slurm's ranged host list, sorted, each name
// once: "gpu1,node[01-03,07],sub[1-10]". Numbers written with leading
// zeros keep their width and range only with numbers of that width;
// others range together whatever their length, as Slurm's.
func Compress(hosts []string) string {
	type host struct {
		prefix, digits string
		pad            int // the width of a zero-padded number; 0: none
		n              int // -1: no number
	}
	var hs []host
	seen := map[string]bool{}
	for _, h := range hosts {
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		m := hostNum().FindStringSubmatch(h)
		n := -1
		if m != nil {
			if k, err := strconv.Atoi(m[2]); err == nil {
				n = k
			}
		}
		if n < 0 {
			hs = append(hs, host{prefix: h, n: -1})
			continue
		}
		pad := 0
		if len(m[2]) > 1 && m[2][0] == '0' {
			pad = len(m[2])
		}
		hs = append(hs, host{prefix: m[1], digits: m[2], pad: pad, n: n})
	}
	slices.SortStableFunc(hs, func(a, b host) int {
		if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		if c := cmp.Compare(a.pad, b.pad); c != 0 {
			return c
		}
		return cmp.Compare(a.n, b.n)
	})
	var out []string
	for i := 0; i < len(hs); {
		h := hs[i]
		if h.n < 0 {
			out = append(out, h.prefix)
			i++
			continue
		}
		// The run of hosts with this prefix and padding.
		j := i
		for j < len(hs) && hs[j].n >= 0 && hs[j].prefix == h.prefix && hs[j].pad == h.pad {
			j++
		}
		if j-i == 1 {
			out = append(out, h.prefix+h.digits)
			i = j
			continue
		}
		var ranges []string
		for k := i; k < j; {
			e := k
			for e+1 < j && hs[e+1].n == hs[e].n+1 {
				e++
			}
			if e == k {
				ranges = append(ranges, hs[k].digits)
			} else {
				ranges = append(ranges, hs[k].digits+"-"+hs[e].digits)
			}
			k = e + 1
		}
		out = append(out, h.prefix+"["+strings.Join(ranges, ",")+"]")
		i = j
	}
	return strings.Join(out, ",")
}

// Expand reads a ranged host list ("node[01-03,07],gpu1") into its
// names, in order. A malformed list is an error naming the part.
func Expand(list string) ([]string, error) {
	var out []string
	for i := 0; i < len(list); {
		// One item: up to a comma outside brackets.
		j, depth := i, 0
		for ; j < len(list); j++ {
			if list[j] == '[' {
				depth++
			} else if list[j] == ']' {
				depth--
			} else if list[j] == ',' && depth == 0 {
				break
			}
		}
		item := list[i:j]
		i = j + 1
		if item == "" {
			continue
		}
		open := strings.IndexByte(item, '[')
		if open < 0 {
			out = append(out, item)
			continue
		}
		if !strings.HasSuffix(item, "]") {
			return nil, fmt.Errorf("%q: want prefix[ranges]", item)
		}
		prefix := item[:open]
		for r := range strings.SplitSeq(item[open+1:len(item)-1], ",") {
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || a > b || b-a > 1<<16 {
				return nil, fmt.Errorf("%q: bad range %q", item, r)
			}
			for n := a; n <= b; n++ {
				out = append(out, fmt.Sprintf("%s%0*d", prefix, len(lo), n))
			}
		}
	}
	return out, nil
}
