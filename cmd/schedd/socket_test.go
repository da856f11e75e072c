package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevDataDirReachable (issue 12 item 9): the dev data dir holds the
// socket, so other users must be able to pass it: a new one is made
// 0711, a 0700 one (mktemp -d) is given search permission, with a
// warning; a socket elsewhere leaves the data dir alone.
func TestDevDataDirReachable(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	base := t.TempDir()
	fresh := filepath.Join(base, "fresh")
	if err := devDataDir(options{dev: true, dataDir: fresh, socket: filepath.Join(fresh, "schedd.sock")}, log); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm()&0o001 == 0 {
		t.Errorf("new data dir mode %04o: others cannot pass it", fi.Mode().Perm())
	}
	private := filepath.Join(base, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := devDataDir(options{dev: true, dataDir: private, socket: filepath.Join(private, "schedd.sock")}, log); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(private); fi.Mode().Perm() != 0o711 {
		t.Errorf("0700 data dir now %04o, want 0711", fi.Mode().Perm())
	}
	if !strings.Contains(logs.String(), "gave other users search permission") {
		t.Errorf("no warning logged: %s", logs.String())
	}
	other := filepath.Join(base, "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := devDataDir(options{dev: true, dataDir: other, socket: "/run/elsewhere.sock"}, log); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(other); fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir without the socket changed to %04o", fi.Mode().Perm())
	}
}

// unreachable names the first directory others cannot pass.
func TestUnreachableSocketDir(t *testing.T) {
	base := t.TempDir()
	for d := base; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 && d != base {
			t.Skipf("SKIP: %s above the test dir is not passable by others", d)
		}
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	closed := filepath.Join(base, "a", "closed")
	if err := os.MkdirAll(filepath.Join(closed, "open"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(closed, 0o750); err != nil {
		t.Fatal(err)
	}
	if dir, mode := unreachable(filepath.Join(closed, "open", "s.sock")); dir != closed || mode != 0o750 {
		t.Errorf("unreachable = %s %04o, want %s 0750", dir, mode, closed)
	}
	if dir, _ := unreachable(filepath.Join(base, "a", "s.sock")); dir != "" {
		t.Errorf("unreachable = %s for an open path", dir)
	}
}
