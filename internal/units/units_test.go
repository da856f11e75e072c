package units

import (
	"errors"
	"testing"
	"time"
)

func TestSizeRoundTrip(t *testing.T) {
	for _, b := range []int64{1, 1023, 1 << 10, 1536 << 20, 16 << 30, 3 << 40, 5 << 50} {
		s := FormatSize(b)
		got, err := ParseSize(s)
		if err != nil || got != b {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", b, s, got, err)
		}
	}
}

func TestSizeUnits(t *testing.T) {
	for in, want := range map[string]int64{
		"16G": 16 << 30, "16g": 16 << 30, "16GiB": 16 << 30, "16GB": 16e9,
		"1.5T": 3 << 39, "512": 512, "2 mib": 2 << 20,
	} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1G", "8XB", "1e3"} {
		if _, err := ParseSize(in); !errors.Is(err, ErrSize) {
			t.Errorf("ParseSize(%q): err %v, want ErrSize", in, err)
		}
	}
}

func TestDurationForms(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90": 90 * time.Minute, "1:30:00": 90 * time.Minute, "2-00:00:00": 48 * time.Hour,
		"1d12h": 36 * time.Hour, "45m": 45 * time.Minute,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseDuration("1:61:00"); !errors.Is(err, ErrDuration) {
		t.Errorf("1:61:00: err %v, want ErrDuration", err)
	}
}
