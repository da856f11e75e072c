package eventually

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a T that records the failure instead of ending the test.
type recorder struct{ msg string }

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
}

func TestWithinHoldsAfterPolls(t *testing.T) {
	n := 0
	if !Within(time.Second, func() bool { n++; return n == 5 }) {
		t.Fatal("a condition that holds at the fifth poll was given up")
	}
	if n != 5 {
		t.Fatalf("polled %d times after the condition held at the fifth", n)
	}
}

func TestWithinLooksOnceMoreAtTheDeadline(t *testing.T) {
	start := time.Now()
	var last time.Time
	if Within(30*time.Millisecond, func() bool { last = time.Now(); return false }) {
		t.Fatal("a condition that never holds was reported held")
	}
	if since := last.Sub(start); since < 30*time.Millisecond {
		t.Fatalf("last poll %v after the start, before the 30ms deadline", since)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("gave up after %v for a 30ms deadline", took)
	}
}

func TestFailuresNameWhatAndTheLastValue(t *testing.T) {
	var r recorder
	True(&r, 10*time.Millisecond, "the job runs", func() bool { return false })
	if !strings.Contains(r.msg, "the job runs") || !strings.Contains(r.msg, "10ms") {
		t.Errorf("True: %q", r.msg)
	}

	r = recorder{}
	i := 0
	NoError(&r, 10*time.Millisecond, "the node is up", func() error { i++; return fmt.Errorf("try %d: %w", i, errors.New("refused")) })
	if !strings.Contains(r.msg, "the node is up") || !strings.Contains(r.msg, fmt.Sprintf("try %d: refused", i)) {
		t.Errorf("NoError (after %d tries): %q", i, r.msg)
	}

	r = recorder{}
	Equal(&r, 10*time.Millisecond, "state", "RUN", func() string { return "PEND" })
	if !strings.Contains(r.msg, `last seen "PEND", want "RUN"`) {
		t.Errorf("Equal: %q", r.msg)
	}

	r = recorder{}
	got := Value(&r, 10*time.Millisecond, "jobs", func() ([]int, bool) { return []int{1, 2}, false })
	if !strings.Contains(r.msg, "jobs: last seen: [1 2]") || len(got) != 2 {
		t.Errorf("Value: %q, returned %v", r.msg, got)
	}

	r = recorder{}
	if v := Value(&r, time.Second, "ready", func() (int, bool) { return 7, true }); v != 7 || r.msg != "" {
		t.Errorf("Value that holds: %d, failure %q", v, r.msg)
	}
}
