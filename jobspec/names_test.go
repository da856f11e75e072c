package jobspec

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestNameRules checks each name rule against the regexp it replaced, on
// edge cases and on random strings over the rule's alphabet and a few
// bytes outside it.
func TestNameRules(t *testing.T) {
	rules := []struct {
		name string
		rule nameRule
		re   string
	}{
		{"job", jobNameRule, `^[A-Za-z0-9][A-Za-z0-9_.-]*$`},
		{"role", roleNameRule, `^[a-z]+$`},
		{"service", serviceRule, `^[a-z][a-z0-9-]{0,31}$`},
		{"mount", mountRule, `^[A-Za-z][A-Za-z0-9_-]*$`},
		{"env", envKeyRule, `^[A-Za-z_][A-Za-z0-9_]*$`},
		{"partition", partRule, `^[A-Za-z][A-Za-z0-9_-]{0,62}$`},
		{"image", imageNameRule, `^[A-Za-z0-9][A-Za-z0-9_.:-]{0,254}$`},
	}
	fixed := []string{"", "a", "A", "0", "_", "-", ".", ":", "a\n", "\na", "a b", "é", "aé", "a/b", "a\x00",
		"x" + strings.Repeat("y", 30), "x" + strings.Repeat("y", 31), "x" + strings.Repeat("y", 32),
		"x" + strings.Repeat("y", 62), "x" + strings.Repeat("y", 63),
		"x" + strings.Repeat("y", 254), "x" + strings.Repeat("y", 255)}
	const alphabet = "azAZ09_.-:/ \n\x00\xc3\xa9"
	r := rand.New(rand.NewPCG(1, 2))
	for _, tt := range rules {
		re := regexp.MustCompile(tt.re)
		check := func(s string) {
			if got, want := tt.rule.ok(s), re.MatchString(s); got != want {
				t.Errorf("%s rule on %q: %v, the regexp %s says %v", tt.name, s, got, tt.re, want)
			}
		}
		for _, s := range fixed {
			check(s)
		}
		for range 5000 {
			b := make([]byte, r.IntN(6))
			for i := range b {
				b[i] = alphabet[r.IntN(len(alphabet))]
			}
			check(string(b))
		}
	}
}
