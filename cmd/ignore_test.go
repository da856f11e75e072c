// Package cmd holds one directory per binary. Its tests check the
// repository's layout: the binaries `go build ./cmd/NAME` leaves in the
// root stay out of git, and the import rules of docs/ARCHITECTURE.md hold.
package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestEveryBinaryIgnoredAtRoot: each cmd/NAME is in .gitignore as /NAME,
// so a binary built in the root is never committed by accident.
func TestEveryBinaryIgnoredAtRoot(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: no git binary to ask which paths are ignored")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("SKIP: not a git checkout; nothing to commit by accident")
	}
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if fi, err := os.Stat(filepath.Join(root, e.Name())); err == nil && fi.IsDir() {
			continue // a directory of that name (nodelet/): go build cannot write the binary there
		}
		// --no-index: whether it would be ignored, tracked or not.
		if err := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", e.Name()).Run(); err != nil {
			t.Errorf("/%s is not in .gitignore: `go build ./cmd/%s` in the root would leave a binary git offers to commit", e.Name(), e.Name())
		}
		// …and the source directory itself stays tracked.
		if err := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", "cmd/"+e.Name()+"/main.go").Run(); err == nil {
			t.Errorf("cmd/%s/main.go is ignored", e.Name())
		}
	}
}
