package cli

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// ParseRange reads a time range (bhist -S, -C; bacct -C): "from,to", "from," or ",to"; a lone time
// is "from" (until now).
func ParseRange(s string, now time.Time) (from, to time.Time, err error) {
	a, b, _ := strings.Cut(s, ",")
	if a = strings.TrimSpace(a); a != "" {
		if from, err = ParseTime(a, now); err != nil {
			return
		}
	}
	if b = strings.TrimSpace(b); b != "" {
		if to, err = ParseTime(b, now); err != nil {
			return
		}
	}
	if !from.IsZero() && !to.IsZero() && to.Before(from) {
		err = errors.New("the range ends before it begins")
	}
	return
}

// timeLayouts are the absolute times ParseTime takes, in the local zone.
var timeLayouts = []string{"2006-01-02", "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02 15:04:05",
	"2006/01/02", "2006/01/02/15:04"}

// ParseTime reads one end of a range: RFC 3339, one of timeLayouts (a
// date alone is its midnight), or a duration meaning that long before now.
func ParseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, now.Location()); err == nil {
			return t, nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time: use 2026-11-22, 2026-11-22T15:04, 2026/11/22/15:04, RFC 3339 or a duration ago such as 2h", s)
}

// EndedFilter holds the filters bhist and bacct share: -S, -C, --since,
// --until, -A, -p and -s.
type EndedFilter struct {
	submitted, completed, since, until *string
	accounts, partitions, states       StringList
}

// EndedFilterFlags defines the shared filters on fs.
func EndedFilterFlags(fs *FlagSet) *EndedFilter {
	f := &EndedFilter{}
	f.submitted = fs.String("S", "", "only jobs submitted in `from,to`: times such as 2026-11-22, 2026-11-22T15:04,\n2026/11/22/15:04 or a duration ago (2h); either end may be empty")
	f.completed = fs.String("C", "", "only jobs that ended in `from,to` (as -S)")
	f.since = fs.String("since", "", "only jobs that ended at or after `time` (a time as -S takes)")
	f.until = fs.String("until", "", "only jobs that ended at or before `time`")
	fs.Var(&f.accounts, "A", "only jobs charged to `account` (repeatable, or comma-separated)")
	fs.Var(&f.partitions, "p", "only jobs of `partition` (repeatable, or comma-separated)")
	fs.Var(&f.states, "s", "only jobs that ended in `state`: COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL or PREEMPTED\n(repeatable, or comma-separated)")
	return f
}

// EndedOnly says whether a filter given picks ended jobs only: an end
// time or an end state.
func (f *EndedFilter) EndedOnly() bool {
	return *f.completed != "" || *f.since != "" || *f.until != "" || len(f.states) > 0
}

// endStates are the states -s takes.
var endStates = []string{"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "REQUEUED"}

// Query adds the filters to q (GET /v1/history's and /v1/accounting's
// parameters); times are read at now. A bad value is an error naming
// its flag.
func (f *EndedFilter) Query(q url.Values, now time.Time) error {
	if *f.completed != "" && (*f.since != "" || *f.until != "") {
		return errors.New("-C and --since/--until both bound the end time: give one of them")
	}
	type bound struct {
		flag, val, param string
		from             bool
	}
	var bounds []bound
	for _, r := range []struct{ flag, val, from, to string }{
		{"-S", *f.submitted, "submitted_from", "submitted_to"}, {"-C", *f.completed, "ended_from", "ended_to"},
	} {
		if r.val == "" {
			continue
		}
		from, to, err := ParseRange(r.val, now)
		if err != nil {
			return fmt.Errorf("%s %s: %w", r.flag, r.val, err)
		}
		if !from.IsZero() {
			q.Set(r.from, from.UTC().Format(time.RFC3339))
		}
		if !to.IsZero() {
			q.Set(r.to, to.UTC().Format(time.RFC3339))
		}
	}
	bounds = append(bounds, bound{"--since", *f.since, "ended_from", true}, bound{"--until", *f.until, "ended_to", false})
	var since, until time.Time
	for _, b := range bounds {
		if b.val == "" {
			continue
		}
		t, err := ParseTime(b.val, now)
		if err != nil {
			return fmt.Errorf("%s %s: %w", b.flag, b.val, err)
		}
		if b.from {
			since = t
		} else {
			until = t
		}
		q.Set(b.param, t.UTC().Format(time.RFC3339))
	}
	if !since.IsZero() && !until.IsZero() && until.Before(since) {
		return errors.New("--until is before --since")
	}
	for _, l := range []struct {
		param string
		vals  StringList
	}{{"account", f.accounts}, {"partition", f.partitions}, {"state", f.states}} {
		for _, v := range l.vals {
			for _, one := range strings.Split(v, ",") {
				if one = strings.TrimSpace(one); one == "" {
					continue
				}
				if l.param == "state" {
					one = strings.ToUpper(one)
					if !slices.Contains(endStates, one) {
						return fmt.Errorf("-s %s: want %s", one, orList(endStates))
					}
				}
				q.Add(l.param, one)
			}
		}
	}
	return nil
}
