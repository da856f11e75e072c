package promtext

import (
	"strings"
	"testing"
)

// TestParseStat reads a command name holding spaces and parentheses.
func TestParseStat(t *testing.T) {
	line := "4242 (a) b (c) R 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 12345 987654 321 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	s, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := (stat{utime: 250, stime: 50, starttime: 12345, vsize: 987654, rss: 321}); s != want {
		t.Errorf("parsed %+v, want %+v", s, want)
	}
	if _, err := parseStat([]byte("4242 (x) R 1 2")); err == nil || !strings.Contains(err.Error(), "/proc/self/stat") {
		t.Errorf("short line: err = %v", err)
	}
}
