package network

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLegacyPins: a Manager whose directory moved (the nodelet's from
// the state directory to the run directory) adopts the containers an
// older one pinned in the old place, with their pins where they are:
// their session still works, DialLoopback reaches them, and their
// Detach unpins them there; Cleanup sweeps the old place's other pins
// and its pool; new containers are pinned in the new place only; and
// both old directories go with the last of the old containers.
func TestLegacyPins(t *testing.T) {
	needNetNS(t)
	nodeAddr(t)
	legacy := filepath.Join(t.TempDir(), "state", "netns")
	dir := filepath.Join(t.TempDir(), "run", "netns")
	m1, err := New(legacy, "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	if err := m1.SetPool(2); err != nil {
		t.Fatal(err)
	}
	if err := m1.Cleanup(); err != nil {
		t.Fatal(err)
	}
	waitPool(t, m1, 2)
	kept, gone := testJob(1, 5241, 2), testJob(2, 5242, 1)
	keptIDs := []string{"j1-main1", "j1-sub1"}
	var eps []Endpoint
	for i, c := range kept.Containers {
		ep, err := m1.Attach(kept, c.Host, keptIDs[i], true)
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ep)
	}
	if _, err := m1.Attach(gone, "main1", "j2-main1", true); err != nil {
		t.Fatal(err)
	}
	if err := m1.reaper.wait(); err != nil { // the pool's moved pins unpinned
		t.Fatal(err)
	}
	waitPool(t, m1, 2)
	// m1 dies here: j1 runs on, j2's container is gone.

	m2, err := New(dir, "node1", "10.250.0.1", DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	m2.SetLegacyDir(legacy)
	if err := m2.SetPool(1); err != nil {
		t.Fatal(err)
	}
	for i, c := range kept.Containers {
		if err := m2.Adopt(kept, c.Host, keptIDs[i]); err != nil {
			t.Fatalf("adopting %s pinned in the old place: %v", keptIDs[i], err)
		}
	}
	if err := m2.Cleanup(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m2.Close() })
	waitPool(t, m2, 1)
	if got := names(t, legacy); strings.Join(got, " ") != "j1-main1 j1-sub1" {
		t.Errorf("old place after Cleanup: %v, want the adopted containers' pins only", got)
	}
	if _, err := os.Stat(legacy + "-pool"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old pool's directory after Cleanup: %v (%v), want it gone", names(t, legacy+"-pool"), err)
	}
	if got := names(t, dir); len(got) > 0 {
		t.Errorf("new place after Cleanup: %v, want nothing", got)
	}
	if got := poolPins(t, m2); len(got) != 1 || !strings.HasPrefix(got[0], dir+"-pool/") {
		t.Errorf("new pool: %v, want one pin under %s-pool", got, dir)
	}

	// The adopted session works, and the nodelet reaches its loopback.
	listenIn(t, eps[0].NetNS, eps[0].Addr+":7000")
	if got, err := dialFrom(t, eps[1].NetNS, eps[0].Addr+":7000"); err != nil || got != eps[1].Addr {
		t.Errorf("adopted session: sub1 to main1: %q, %v", got, err)
	}
	in := listenIn(t, eps[0].NetNS, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := m2.DialLoopback(ctx, keptIDs[0], in.Addr().(*net.TCPAddr).Port); err != nil {
		t.Errorf("DialLoopback of an adopted container pinned in the old place: %v", err)
	} else {
		got, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || strings.TrimSpace(got) != "127.0.0.1" {
			t.Errorf("adopted container's loopback answered %q, %v", got, err)
		}
	}

	// A new container is pinned in the new place only.
	next := testJob(3, 5243, 1)
	ep, err := m2.Attach(next, "main1", "j3-main1", true)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "j3-main1"); ep.NetNS != want {
		t.Errorf("new container's namespace at %s, want %s", ep.NetNS, want)
	}
	if got := names(t, legacy); strings.Join(got, " ") != "j1-main1 j1-sub1" {
		t.Errorf("old place with a new container: %v, want the adopted containers' pins only", got)
	}

	if err := m2.Detach(kept, "main1", keptIDs[0]); err != nil {
		t.Fatal(err)
	}
	if got := names(t, legacy); strings.Join(got, " ") != "j1-sub1" {
		t.Errorf("old place after main1's Detach: %v, want j1-sub1's pin only", got)
	}
	if err := m2.Detach(kept, "sub1", keptIDs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old place after its last container's Detach: %v (%v), want it gone", names(t, legacy), err)
	}
	if err := m2.Detach(next, "main1", "j3-main1"); err != nil {
		t.Fatal(err)
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); len(got) > 0 {
		t.Errorf("new place after the last Detach: %v", got)
	}
	noLeak(t, m2)
}

// TestLegacyDirIsOwn: a legacy directory that is the Manager's own (a
// run directory configured to be the state directory) is no second
// place: nothing there is swept as another nodelet's.
func TestLegacyDirIsOwn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "netns")
	m, err := New(dir, "node1", "10.250.0.1", "")
	if err != nil {
		t.Fatal(err)
	}
	m.SetLegacyDir(dir + "/")
	if m.legacy != "" {
		t.Errorf("legacy %q, want none: it is the Manager's own directory", m.legacy)
	}
}

// names lists dir's entries; none when it does not exist.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestPinDirChecked: New refuses a pin directory others may write, or a
// symbolic link to one, naming it; it makes a missing one 0700.
func TestPinDirChecked(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := New(open, "node1", "10.250.0.1", ""); err == nil || !strings.Contains(err.Error(), open) {
		t.Errorf("New with a pin directory of mode 0777: %v, want an error naming it", err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if _, err := New(link, "node1", "10.250.0.1", ""); err == nil || !strings.Contains(err.Error(), link) {
		t.Errorf("New with a symbolic link for its pin directory: %v, want an error naming it", err)
	}
	made := filepath.Join(base, "run", "netns")
	if _, err := New(made, "node1", "10.250.0.1", ""); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(made); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o700 {
		t.Errorf("pin directory made with mode %v, want 0700", fi.Mode().Perm())
	}
}
