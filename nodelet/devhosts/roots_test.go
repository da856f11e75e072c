package devhosts

import (
	"os/user"
	"slices"
	"testing"
)

// MountRoots: /tmp and the invoking user's home, SUDO_USER's under sudo
// (not root's, whose process it is), else this user's.
func TestMountRoots(t *testing.T) {
	u, err := user.Lookup("nobody")
	if err != nil || u.HomeDir == "" || u.HomeDir == "/" {
		t.Skip("SKIP: no user nobody with a home to stand for SUDO_USER")
	}
	t.Setenv("SUDO_USER", "nobody")
	if got := MountRoots(); !slices.Equal(got, []string{"/tmp", u.HomeDir}) {
		t.Errorf("under sudo: %q, want /tmp and %s", got, u.HomeDir)
	}
	t.Setenv("SUDO_USER", "")
	if got := MountRoots(); len(got) < 1 || got[0] != "/tmp" || slices.Contains(got, u.HomeDir) {
		t.Errorf("without sudo: %q", got)
	}
}
