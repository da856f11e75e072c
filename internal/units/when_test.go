package units

import (
	"errors"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 30, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-12-01T06:00":     time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC),
		"2026-12-01T06:00:30":  time.Date(2026, 12, 1, 6, 0, 30, 0, time.UTC),
		"2026-12-01 06:00":     time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC),
		"2026-12-01":           time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		"now":                  now,
		"now+1hour":            now.Add(time.Hour),
		"now+8":                now.Add(8 * time.Second),
		"now+90minutes":        now.Add(90 * time.Minute),
		"now+2days":            now.Add(48 * time.Hour),
		"now-1h":               now.Add(-time.Hour),
		"11:00":                time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC),
		"09:00":                time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC),
		"midnight":             time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		"noon":                 time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		"2026-12-01T06:00:00Z": time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC),
	} {
		got, err := ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "later", "now+1fortnight", "2026-13-01", "25:00"} {
		if _, err := ParseTime(in, now); !errors.Is(err, ErrTime) {
			t.Errorf("ParseTime(%q): %v, want ErrTime", in, err)
		}
	}
	// Durations as a reservation's: Slurm's and Go's forms.
	for in, want := range map[string]time.Duration{"4:00:00": 4 * time.Hour, "4h": 4 * time.Hour, "1-00:00:00": 24 * time.Hour} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v", in, got, err)
		}
	}
}
