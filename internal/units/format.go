package units

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The writers of sizes and durations. Each serves its own readers, and
// their outputs differ on purpose:
//
//   - FormatSize: exact, read back by ParseSize ("16GiB", "1536MiB"):
//     job files, limits, settings.
//   - FormatSizeRounded: a byte count in schedd's messages, whole GiB or
//     MiB ("64GiB", "1536MiB"), never a long exact count of KiB.
//   - FormatDuration: a limit briefly, read back by ParseDuration ("2h",
//     "1h30m", "7d"): partitions, badmin, schedd's messages.
//
// The tools' table columns have their own forms, in internal/cli
// (format.go): Elapsed (squeue's [D-]H:MM:SS), SlurmElapsed (sacct's
// [D-]HH:MM:SS), CPUTime, Memory ("812K", "120.5M", "3G") and GiB; the
// LSF fields (lsf.go) write LSF's CPU time and KB. Golden files pin
// those.

// FormatSize writes a byte count the way ParseSize reads it back,
// with the largest binary unit that divides it ("16GiB", "1536MiB").
func FormatSize(b int64) string {
	units := []string{"PiB", "TiB", "GiB", "MiB", "KiB"}
	for i, u := range units {
		size := int64(1) << (10 * (len(units) - i))
		if b != 0 && b%size == 0 {
			return strconv.FormatInt(b/size, 10) + u
		}
	}
	return strconv.FormatInt(b, 10)
}

// FormatSizeRounded writes a byte count for a message: whole GiB when
// it is a whole number of GiB ("64GiB"), else MiB rounded down
// ("1536MiB"); a node's capacity (never a round number) stays short.
func FormatSizeRounded(b int64) string {
	const gib, mib = 1 << 30, 1 << 20
	if b%gib == 0 {
		return fmt.Sprintf("%dGiB", b/gib)
	}
	return fmt.Sprintf("%dMiB", b/mib)
}

// FormatDuration writes d briefly, the way ParseDuration reads it back:
// "2h", "1h30m", "45s", "7d".
func FormatDuration(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
