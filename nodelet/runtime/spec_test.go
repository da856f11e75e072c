package runtime

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidID: the hand-written id check takes exactly what the regular
// expression it replaced took.
func TestValidID(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	for _, id := range []string{
		"", "a", "Z9", "troupe-3b2b98a2-8384-4def-be0d-ad465ae72fde", "a.b_c-d",
		"-a", "_a", ".a", "a/b", "a b", "ä", "a\x00", "a\n",
		strings.Repeat("x", 128), strings.Repeat("x", 129), "x" + strings.Repeat("-", 127),
	} {
		if got, want := validID(id), re.MatchString(id); got != want {
			t.Errorf("validID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}
