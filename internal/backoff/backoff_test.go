package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestExpDoublesToCap: the waits double from Min and stop at Max;
// Reset starts over at Min.
func TestExpDoublesToCap(t *testing.T) {
	b := New(100*time.Millisecond, 5*time.Second)
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("wait %d = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Next(); got != 100*time.Millisecond {
		t.Errorf("after Reset: %v, want 100ms", got)
	}
}

// TestExpJitter: with jitter each wait lies in [w·(1−Jitter), w] of the
// unjittered sequence, the waits are not all alike, and the sequence
// itself still doubles to the cap.
func TestExpJitter(t *testing.T) {
	b := &Exp{Min: time.Second, Max: 8 * time.Second, Jitter: 0.5}
	seen := map[time.Duration]bool{}
	for round := 0; round < 50; round++ {
		b.Reset()
		for _, w := range []time.Duration{1, 2, 4, 8, 8} {
			w *= time.Second
			d := b.Next()
			if d < w/2 || d > w {
				t.Fatalf("wait %v outside [%v, %v]", d, w/2, w)
			}
			if w == time.Second {
				seen[d] = true
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("50 first waits with jitter were all %v", seen)
	}
	// Jitter above 1 is taken as 1: never a negative wait.
	b = &Exp{Min: time.Second, Max: time.Second, Jitter: 3}
	for range 100 {
		if d := b.Next(); d < 0 || d > time.Second {
			t.Fatalf("jitter 3: wait %v", d)
		}
	}
}

// TestSleep: Sleep returns nil once d passed, and ctx's error at once
// when ctx ends first (here: already ended, with an hour to wait).
func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep 1ms: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on an ended context: %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > time.Minute {
		t.Errorf("Sleep on an ended context took %v", el)
	}
	b := New(time.Hour, time.Hour)
	if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on an ended context: %v", err)
	}
}
