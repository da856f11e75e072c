package jobspec_test

import (
	"errors"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/jobspec"
)

func TestParseMemory(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"16GiB", 16 << 30, true},
		{"512MiB", 512 << 20, true},
		{"1G", 1 << 30, true},
		{"1g", 1 << 30, true},
		{"1Gi", 1 << 30, true},
		{"1GB", 1e9, true},
		{"1024", 1024, true},
		{"1.5GiB", 3 << 29, true},
		{"2 TiB", 2 << 40, true},
		{" 4K ", 4096, true},
		{"0", 0, true},
		{"", 0, false},
		{"16GX", 0, false},
		{"GiB", 0, false},
		{"-1G", 0, false},
		{"1e3", 0, false},
		{"9999999PiB", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := jobspec.ParseMemory(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseMemory(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
			}
			if err != nil && !errors.Is(err, jobspec.ErrMemory) {
				t.Errorf("error %v does not wrap ErrMemory", err)
			}
		})
	}
}

func TestFormatMemory(t *testing.T) {
	for in, want := range map[int64]string{16 << 30: "16GiB", 1536 << 20: "1536MiB", 1000: "1000", 0: "0", 3 << 40: "3TiB"} {
		if got := jobspec.FormatMemory(in); got != want {
			t.Errorf("FormatMemory(%d) = %q, want %q", in, got, want)
		}
		if back, err := jobspec.ParseMemory(jobspec.FormatMemory(in)); err != nil || back != in {
			t.Errorf("ParseMemory(FormatMemory(%d)) = %d, %v", in, back, err)
		}
	}
}

func TestParseWalltime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"2h", 2 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"1d", 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"90", 90 * time.Minute, true},                 // minutes
		{"5:30", 5*time.Minute + 30*time.Second, true}, // minutes:seconds
		{"1:30:00", 90 * time.Minute, true},            // hours:minutes:seconds
		{"2-00:00:00", 48 * time.Hour, true},           // days-hours:minutes:seconds
		{"2-12", 60 * time.Hour, true},                 // days-hours
		{"1-02:30", 26*time.Hour + 30*time.Minute, true},
		{"-1h", -time.Hour, true}, // parsed; Validate rejects it
		{"2 hours", 0, false},
		{"", 0, false},
		{"1:60:00", 0, false},
		{"1-24", 0, false},
		{"1:2:3:4", 0, false},
		{"d", 0, false},
		{"1d-1h", 0, false},
		{"99999999999", 0, false},
		{"99999d", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := jobspec.ParseWalltime(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseWalltime(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
			}
			if err != nil && !errors.Is(err, jobspec.ErrWalltime) {
				t.Errorf("error %v does not wrap ErrWalltime", err)
			}
		})
	}
}
