package cli

import (
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	loc := time.FixedZone("CET", 3600)
	now := time.Date(2026, 11, 22, 15, 0, 0, 0, loc)
	for in, want := range map[string]time.Time{
		"2026-11-20":           time.Date(2026, 11, 20, 0, 0, 0, 0, loc),
		"2026-11-20T08:30":     time.Date(2026, 11, 20, 8, 30, 0, 0, loc),
		"2026/11/20/08:30":     time.Date(2026, 11, 20, 8, 30, 0, 0, loc),
		"2026-11-20T08:30:00Z": time.Date(2026, 11, 20, 8, 30, 0, 0, time.UTC),
		"2h":                   now.Add(-2 * time.Hour),
	} {
		if got, err := ParseTime(in, now); err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
