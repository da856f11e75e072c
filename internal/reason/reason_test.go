package reason

import "testing"

// Every listed reason is pending, and free text is not.
func TestIsPending(t *testing.T) {
	for _, r := range Pending {
		if !IsPending(r) {
			t.Errorf("IsPending(%q) = false for a listed pending reason", r)
		}
	}
	for _, r := range []string{"", NotResponding, "exit code 1", "resources"} {
		if IsPending(r) {
			t.Errorf("IsPending(%q) = true", r)
		}
	}
}
