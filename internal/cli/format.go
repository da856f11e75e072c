package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// TimeLayout is how timestamps are shown.
const TimeLayout = "2006-01-02 15:04:05"

// Timestamp shows t in loc as TimeLayout, or "-" for the zero time.
func Timestamp(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(loc).Format(TimeLayout)
}

// The durations and sizes of the tools' tables. Each serves one
// output (the golden files pin them), so they differ on purpose:
// Elapsed is squeue's and bjobs' run time, SlurmElapsed sacct's,
// CPUTime bhist's; Memory is bhist's and bjob's peak, GiB the resource
// columns. The LSF fields write LSF's own forms (lsf.go: lsfCPU,
// lsfMem). Sizes and limits that are read back (job files, partitions,
// schedd's messages) are internal/units' FormatSize, FormatSizeRounded
// and FormatDuration.

// Elapsed shows d as Slurm does: "0:05", "12:34", "1:02:03", "2-03:04:05".
// Negative durations (clock skew) show as "0:00".
func Elapsed(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	days, s := s/86400, s%86400
	h, s := s/3600, s%3600
	m, s := s/60, s%60
	switch {
	case days > 0:
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, m, s)
	case h > 0:
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d", m, s)
}

// SlurmElapsed is sacct's Elapsed (Slurm's secs2time_str): HH:MM:SS, or
// D-HH:MM:SS from a day on.
func SlurmElapsed(d time.Duration) string {
	if d >= 24*time.Hour {
		return Elapsed(d) // the same D-HH:MM:SS
	}
	s := int64(max(d, 0) / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// CPUTime shows CPU time: seconds with two decimals under a minute
// ("1.52s"), else as Elapsed; "-" for none reported.
func CPUTime(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	}
	return Elapsed(d)
}

// GiB shows bytes in GiB with at most one decimal: "16", "15.5", "0.1".
// Anything above zero but under 0.05 GiB shows as "<0.1".
func GiB(bytes int64) string {
	if bytes > 0 && bytes < 1<<30/20 {
		return "<0.1"
	}
	return trimFloat(float64(bytes)/(1<<30), 1)
}

// Memory shows bytes in KiB, MiB or GiB, at most one decimal ("812K",
// "120.5M", "3G"); "-" for none reported.
func Memory(b int64) string {
	switch {
	case b <= 0:
		return "-"
	case b < 1<<20:
		return trimFloat(float64(b)/(1<<10), 1) + "K"
	case b < 1<<30:
		return trimFloat(float64(b)/(1<<20), 1) + "M"
	}
	return trimFloat(float64(b)/(1<<30), 1) + "G"
}

// Cores shows millicores as cores: "4", "0.5", "1.25".
func Cores(milli int64) string {
	return trimFloat(float64(milli)/1000, 3)
}

// Number shows f with at most prec decimals and no trailing zeros.
func Number(f float64, prec int) string { return trimFloat(f, prec) }

func trimFloat(f float64, prec int) string {
	s := strconv.FormatFloat(f, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// IsTerminal reports whether w is an interactive terminal.
func IsTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
