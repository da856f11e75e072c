package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestRewriteBinaries: each binary is replaced by a new file (a new
// inode, written by write(2)) with the same bytes and mode; anything but
// a regular file is left alone.
func TestRewriteBinaries(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "prog")
	want := bytes.Repeat([]byte("\x7fELF troupe "), 100000)
	if err := os.WriteFile(bin, want, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("prog", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	inode := func(p string) uint64 {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	before := inode(bin)
	if err := rewriteBinaries(dir); err != nil {
		t.Fatal(err)
	}
	if inode(bin) == before {
		t.Error("the binary was not rewritten: same inode")
	}
	got, err := os.ReadFile(bin)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("rewritten binary: %d bytes, %v; want the same %d bytes", len(got), err, len(want))
	}
	if st, _ := os.Stat(bin); st.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", st.Mode().Perm())
	}
	if l, err := os.Readlink(filepath.Join(dir, "link")); err != nil || l != "prog" {
		t.Errorf("symlink: %q, %v; want it left alone", l, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d entries left, want 2 (no temporary file)", len(ents))
	}
}
