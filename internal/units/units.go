// Package units reads and writes the sizes and durations people type:
// "16G", "512MiB", "2h", "1-12:00:00", and turns cores (cpu 0.5) into
// the millicores schedd counts (MilliCPU). It is the one place these
// formats are defined, so a job file, a partition file, a node's flags and
// the command-line tools all read "16G" as the same number of bytes
// (16 GiB, as Slurm and Docker do). It imports only the standard library.
package units

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors returned by ParseSize and ParseDuration, for errors.Is.
var (
	ErrSize     = errors.New("invalid memory size")
	ErrDuration = errors.New("invalid walltime")
)

// sizeUnits maps a lower-cased unit to its size in bytes. The short
// forms (K, M, G, T) are powers of 1024, as in Slurm's --mem and Docker;
// the SI forms with a B (KB, MB, GB, TB) are powers of 1000.
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "ki": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mi": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gi": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "ti": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	"p": 1 << 50, "pi": 1 << 50, "pib": 1 << 50, "pb": 1e15,
}

// The regexps here are compiled on first use, not at the start of every
// command that links this package (bsub starts in a few milliseconds).
var sizeRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)$`) })

// SizeHelp says what ParseSize accepts; it ends diagnostics.
const SizeHelp = `write a number with a unit, like "512MiB", "16GiB" or "1.5T" ` +
	`(K, M, G, T and KiB…TiB are powers of 1024; KB, MB, GB, TB powers of 1000), ` +
	`or a plain number of bytes`

// ParseSize parses a memory size: a number of bytes ("1073741824"), or a
// number with a unit, case-insensitive: K, M, G, T, P and Ki…Pi, KiB…PiB
// are powers of 1024 (Slurm and Docker read "16G" so); KB, MB, GB, TB, PB
// are powers of 1000. Fractions are allowed ("1.5GiB") and rounded down to
// whole bytes. The error wraps ErrSize.
func ParseSize(s string) (int64, error) {
	m := sizeRe().FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%w: %q", ErrSize, s)
	}
	unit, ok := sizeUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Errorf("%w: %q: unknown unit %q", ErrSize, s, m[2])
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrSize, s)
	}
	b := n * unit
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("%w: %q is too large", ErrSize, s)
	}
	return int64(b), nil
}

// DurationHelp says what ParseDuration accepts; it ends diagnostics.
const DurationHelp = `write a duration like "2h", "90m", "1h30m" or "1d12h", ` +
	`or Slurm's "minutes", "hours:minutes:seconds", "days-hours:minutes:seconds" ("1:30:00", "2-00:00:00")`

// maxDurationSeconds keeps durations far from time.Duration's overflow.
const maxDurationSeconds = 100 * 365 * 86400

var slurmTimeRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:([0-9]+)-)?([0-9]+)(?::([0-9]+))?(?::([0-9]+))?$`)
})

// ParseDuration parses a time limit in either of two forms:
//
//   - a Go duration, with "d" (24h) allowed as a leading unit: "2h",
//     "90m", "1h30m", "1d12h";
//   - Slurm's --time forms: "minutes", "minutes:seconds",
//     "hours:minutes:seconds", "days-hours", "days-hours:minutes",
//     "days-hours:minutes:seconds" ("90", "1:30:00", "2-00:00:00").
//
// A bare number is minutes, as in Slurm. The error wraps ErrDuration. It
// does not reject zero or negative durations; callers decide.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if m := slurmTimeRe().FindStringSubmatch(s); m != nil {
		return slurmTime(s, m)
	}
	var days time.Duration
	rest := s
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseUint(s[:i], 10, 32)
		if err != nil || n > maxDurationSeconds/86400 {
			return 0, fmt.Errorf("%w: %q", ErrDuration, s)
		}
		days, rest = time.Duration(n)*24*time.Hour, s[i+1:]
		if rest == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(rest)
	if err != nil || (days > 0 && (d < 0 || days+d < days)) {
		return 0, fmt.Errorf("%w: %q", ErrDuration, s)
	}
	return days + d, nil
}

// slurmTime reads a match of slurmTimeRe: [days-]a[:b[:c]].
func slurmTime(s string, m []string) (time.Duration, error) {
	num := func(x string) int64 {
		if x == "" {
			return 0
		}
		n, err := strconv.ParseInt(x, 10, 32)
		if err != nil {
			return -1
		}
		return n
	}
	days, a, b, c := num(m[1]), num(m[2]), num(m[3]), num(m[4])
	if days < 0 || a < 0 || b < 0 || c < 0 {
		return 0, fmt.Errorf("%w: %q is out of range", ErrDuration, s)
	}
	var h, mi, sec int64
	switch {
	case m[1] != "": // days-hours[:minutes[:seconds]]
		h, mi, sec = a, b, c
	case m[4] != "": // hours:minutes:seconds
		h, mi, sec = a, b, c
	case m[3] != "": // minutes:seconds
		mi, sec = a, b
	default: // minutes
		mi = a
	}
	if (m[3] != "" && b >= 60) || (m[4] != "" && c >= 60) || (m[1] != "" && h >= 24) {
		return 0, fmt.Errorf("%w: %q: a field is out of range", ErrDuration, s)
	}
	total := ((days*24+h)*60+mi)*60 + sec
	if total > maxDurationSeconds {
		return 0, fmt.Errorf("%w: %q is too long", ErrDuration, s)
	}
	return time.Duration(total) * time.Second, nil
}
