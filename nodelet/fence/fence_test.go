package fence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/eventually"
	"github.com/troupe-hpc/troupe/internal/procfs"
)

func TestLeaseFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if _, err := Read(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want ErrNotExist", err)
	}
	for _, l := range []Lease{{Owner: "12.ab", Deadline: 42 * time.Second}, {Owner: "x", Unfenced: true}, {Owner: "y"}} {
		if err := Write(path, l); err != nil {
			t.Fatal(err)
		}
		got, err := Read(path)
		if err != nil || got != l {
			t.Fatalf("read back %+v, %v; want %+v", got, err, l)
		}
	}
	if err := Write(path, Lease{Owner: "a b"}); !errors.Is(err, ErrBadLease) {
		t.Fatalf("owner with a space: %v, want ErrBadLease", err)
	}
	for _, bad := range []string{"", "junk\n", magic + "\ndeadline 5\n", magic + "\nowner o\ndeadline -1\n", magic + "\nowner o\ndeadline x\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(path); !errors.Is(err, ErrBadLease) {
			t.Errorf("%q: %v, want ErrBadLease", bad, err)
		}
	}
	if !(Lease{Deadline: 5}).Expired(5) || (Lease{Deadline: 5}).Expired(4) || (Lease{Unfenced: true}).Expired(1<<60) {
		t.Fatal("Expired is wrong")
	}
}

// fakeNodelet starts a process with two children, as a nodelet with
// process-runtime containers; it returns the process and its children.
func fakeNodelet(t *testing.T) (*exec.Cmd, []int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 300 & sleep 300 & exec sleep 300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	kids := eventually.Value(t, 5*time.Second, "the fake nodelet's 2 children", func() ([]int, bool) {
		kids := procfs.Descendants(cmd.Process.Pid, 0)
		return kids, len(kids) == 2
	})
	return cmd, kids
}

func alive(pid int) bool {
	s, err := procfs.Read(pid)
	return err == nil && s.Live()
}

// TestFenceKillsAtDeadline: while the lease holds the nodelet's children
// live; once the deadline passes they are killed within the poll, the
// nodelet itself is left alone; a removed file ends the fence.
func TestFenceKillsAtDeadline(t *testing.T) {
	nodelet, kids := fakeNodelet(t)
	path := filepath.Join(t.TempDir(), FileName)
	deadline := Now() + 600*time.Millisecond
	if err := Write(path, Lease{Owner: "me", Deadline: deadline}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{LeaseFile: path, Owner: "me", Nodelet: nodelet.Process.Pid, Children: true,
		Poll: 50 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), cfg, nil) }()

	for Now() < deadline-100*time.Millisecond {
		for _, k := range kids {
			if !alive(k) {
				t.Fatalf("child %d killed %s before the deadline", k, deadline-Now())
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, k := range kids {
		eventually.True(t, deadline+2*time.Second-Now(), fmt.Sprintf("child %d killed by 2s after the deadline", k),
			func() bool { return !alive(k) })
	}
	t.Logf("children dead %s after the deadline", (Now() - deadline).Round(time.Millisecond))
	if !alive(nodelet.Process.Pid) {
		t.Fatal("the fence killed the nodelet itself")
	}
	select {
	case err := <-done:
		t.Fatalf("fence returned %v while its nodelet lives and the file is there", err)
	default:
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("fence did not exit after the lease file was removed")
	}
}

// TestFenceRenewedAndHandedOver: a lease renewed before its deadline
// kills nothing; a file taken over by another owner ends the fence; the
// fence of a dead nodelet exits once the lease ran out and it killed.
func TestFenceRenewedAndHandedOver(t *testing.T) {
	nodelet, kids := fakeNodelet(t)
	path := filepath.Join(t.TempDir(), FileName)
	renew := func(d time.Duration) {
		if err := Write(path, Lease{Owner: "me", Deadline: Now() + d}); err != nil {
			t.Fatal(err)
		}
	}
	renew(200 * time.Millisecond)
	cfg := Config{LeaseFile: path, Owner: "me", Nodelet: nodelet.Process.Pid, Children: true,
		Poll: 50 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), cfg, nil) }()
	for range 10 { // 1s of renewals every 100ms
		renew(200 * time.Millisecond)
		time.Sleep(100 * time.Millisecond)
	}
	for _, k := range kids {
		if !alive(k) {
			t.Fatalf("child %d killed although the lease was renewed", k)
		}
	}
	if err := Write(path, Lease{Owner: "next", Deadline: Now()}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("fence did not exit when another owner took the lease")
	}
	for _, k := range kids {
		if !alive(k) {
			t.Fatalf("child %d killed by a fence whose lease was taken over", k)
		}
	}

	// A dead nodelet: its fence kills at the deadline, then exits.
	renew(300 * time.Millisecond)
	go func() { done <- Run(context.Background(), cfg, nil) }()
	_ = nodelet.Process.Signal(syscall.SIGKILL) // its children live on
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("fence of a dead nodelet did not exit after its deadline")
	}
}
