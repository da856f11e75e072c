// Package eventually waits, in tests, for a condition to hold: it polls
// the condition until it holds or a deadline passes, and then fails the
// test with a message naming what was waited for and what was last
// seen. Tests wait on conditions with it rather than sleeping for a
// guessed time, so they pass as soon as the system is ready and fail
// with a reason when it never is.
//
// The poll starts at a millisecond and doubles up to MaxInterval, so a
// condition that holds at once costs nothing and a slow one (a command
// run per poll, say) is not hammered. The condition is checked once
// more at the deadline, so a wait never fails without a last look.
package eventually

import (
	"fmt"
	"time"
)

// MaxInterval is the longest pause between two polls.
const MaxInterval = 100 * time.Millisecond

// T is the part of *testing.T (or *testing.B) the helpers use.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Within polls cond until it returns true or d passes, and reports
// whether it held. It is for callers that handle a timeout themselves
// (a retry, a test helper with its own message, a goroutine other than
// the test's).
func Within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(pause, left))
		pause = min(2*pause, MaxInterval)
	}
}

// True waits up to d for cond to hold; otherwise it fails t with
// "not within d: what".
func True(t T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(d, cond) {
		t.Fatalf("not within %v: %s", d, what)
	}
}

// NoError waits up to d for f to return nil; otherwise it fails t with
// what and the last error f returned, which should say what it saw
// ("2 jobs running, want 3").
func NoError(t T, d time.Duration, what string, f func() error) {
	t.Helper()
	var last error
	if !Within(d, func() bool { last = f(); return last == nil }) {
		t.Fatalf("not within %v: %s: last seen: %v", d, what, last)
	}
}

// Value waits up to d for f to report ok, and returns the value it
// gave then; otherwise it fails t with what and the last value seen.
func Value[V any](t T, d time.Duration, what string, f func() (V, bool)) V {
	t.Helper()
	var v V
	var ok bool
	if !Within(d, func() bool { v, ok = f(); return ok }) {
		t.Fatalf("not within %v: %s: last seen: %s", d, what, show(v))
	}
	return v
}

// Equal waits up to d for f to return want; otherwise it fails t with
// what, the last value f returned and want.
func Equal[V comparable](t T, d time.Duration, what string, want V, f func() V) {
	t.Helper()
	var got V
	if !Within(d, func() bool { got = f(); return got == want }) {
		t.Fatalf("not within %v: %s: last seen %s, want %s", d, what, show(got), show(want))
	}
}

func show(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%v", v)
}
