package units

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrTime is returned, wrapped, by ParseTime.
var ErrTime = errors.New("invalid time")

// TimeHelp says what ParseTime accepts; it ends diagnostics.
const TimeHelp = `use a date and time ("2026-12-01T06:00", "2026-12-01 06:00:00"), a time today or tomorrow ("06:00"), "now" with an offset ("now+1hour", "now+90minutes", "now+30", in seconds), "midnight", "noon", "today" or "tomorrow"`

var nowRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^now(?:([+-])([0-9]+)([a-z]*))?$`)
})

// offsetUnits are the units of a "now+N" offset, as Slurm spells them.
var offsetUnits = map[string]time.Duration{
	"": time.Second, "s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// ParseTime parses a point in time as Slurm's scontrol reads a
// reservation's StartTime, in now's location: an absolute date and time
// ("2026-12-01T06:00[:SS]", with a space or a T, or a date alone at
// midnight), a time of day ("06:00[:SS]": today, or tomorrow when it has
// passed), "now[+-N[unit]]" (seconds by default; minutes, hours, days,
// weeks), "midnight" (the next), "noon" (the next), "today" (its start)
// or "tomorrow". The error wraps ErrTime.
func ParseTime(s string, now time.Time) (time.Time, error) {
	in := strings.ToLower(strings.TrimSpace(s))
	loc := now.Location()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	switch in {
	case "today":
		return day, nil
	case "tomorrow", "midnight":
		return day.AddDate(0, 0, 1), nil
	case "noon":
		if t := day.Add(12 * time.Hour); t.After(now) {
			return t, nil
		}
		return day.AddDate(0, 0, 1).Add(12 * time.Hour), nil
	}
	if m := nowRe().FindStringSubmatch(in); m != nil {
		if m[1] == "" {
			return now, nil
		}
		n, err := strconv.ParseInt(m[2], 10, 32)
		unit, ok := offsetUnits[m[3]]
		if err != nil || !ok {
			return time.Time{}, fmt.Errorf("%w: %q: %s", ErrTime, s, TimeHelp)
		}
		d := time.Duration(n) * unit
		if m[1] == "-" {
			d = -d
		}
		return now.Add(d), nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, strings.ToUpper(in), loc); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"15:04:05", "15:04"} {
		if t, err := time.ParseInLocation(layout, in, loc); err == nil {
			at := day.Add(time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second)
			if !at.After(now) {
				at = at.AddDate(0, 0, 1)
			}
			return at, nil
		}
	}
	if t, err := time.Parse(time.RFC3339, strings.ToUpper(in)); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%w: %q: %s", ErrTime, s, TimeHelp)
}
