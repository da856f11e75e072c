package fdlimit

import (
	"syscall"
	"testing"
)

// TestRaise: with the soft limit lowered below the hard one, Raise puts
// it back up to the hard one and says so.
func TestRaise(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	if orig.Max < 512 {
		t.Skipf("SKIP: the hard limit of open files is %d, too low to lower the soft one below it and still run", orig.Max)
	}
	low := syscall.Rlimit{Cur: 256, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	soft, hard, err := Raise()
	if err != nil {
		t.Fatal(err)
	}
	if soft != orig.Max || hard != orig.Max {
		t.Errorf("Raise() = %d, %d; want the hard limit %d for both", soft, hard, orig.Max)
	}
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if now.Cur != orig.Max {
		t.Errorf("soft limit after Raise is %d, want %d", now.Cur, orig.Max)
	}
}
