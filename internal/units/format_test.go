package units

import (
	"testing"
	"time"
)

// TestFormatSizeRounded: whole GiB stay GiB, anything else is whole MiB
// rounded down, however large (no TiB), zero included.
func TestFormatSizeRounded(t *testing.T) {
	for in, want := range map[int64]string{
		0:                     "0GiB",
		64 << 30:              "64GiB",
		1536 << 20:            "1536MiB",
		2048 << 30:            "2048GiB",
		540_000_000_000:       "514984MiB",
		(1 << 20) - 1:         "0MiB",
		(3 << 30) + 1<<20 + 5: "3073MiB",
	} {
		if got := FormatSizeRounded(in); got != want {
			t.Errorf("FormatSizeRounded(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestFormatDuration: whole days as days, no trailing zero units, and
// ParseDuration reads every form back.
func TestFormatDuration(t *testing.T) {
	for in, want := range map[time.Duration]string{
		2 * time.Hour:                "2h",
		90 * time.Minute:             "1h30m",
		45 * time.Second:             "45s",
		7 * 24 * time.Hour:           "7d",
		36 * time.Hour:               "36h",
		time.Hour + 30*time.Second:   "1h0m30s",
		25*time.Hour + 5*time.Minute: "25h5m",
	} {
		got := FormatDuration(in)
		if got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", in, got, want)
		}
		if back, err := ParseDuration(got); err != nil || back != in {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", got, back, err, in)
		}
	}
}

// TestFormatSizeRoundTrip: FormatSize is exact, ParseSize reads it back.
func TestFormatSizeRoundTrip(t *testing.T) {
	for _, in := range []int64{0, 1, 1023, 1 << 10, 1536 << 20, 16 << 30, 1 << 40, 3 << 50, 540_000_000_000} {
		if back, err := ParseSize(FormatSize(in)); err != nil || back != in {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", in, FormatSize(in), back, err)
		}
	}
}
