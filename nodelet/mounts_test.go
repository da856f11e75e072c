package nodelet

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

func TestCheckMounts(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	data := filepath.Join(root, "data")
	_ = os.Mkdir(data, 0o755)
	_ = os.Symlink(outside, filepath.Join(root, "escape"))
	_ = os.Symlink(data, filepath.Join(root, "alias"))
	roots := []string{root}
	tests := []struct {
		name, src, target string
		want              string // "" ok; else in the error
	}{
		{"Inside", data, "/home/work/data", ""},
		{"SymlinkInside", filepath.Join(root, "alias"), "/data", "symbolic link"},
		{"Outside", outside, "/data", "outside the allowed roots"},
		{"DotDot", data + "/../../etc", "/data", `contains ".."`},
		{"SymlinkEscape", filepath.Join(root, "escape"), "/data", "symbolic link"},
		{"SymlinkInRoot", filepath.Join(root, "alias", "x"), "/data", "symbolic link"},
		{"Missing", filepath.Join(root, "nope"), "/data", "no such file"},
		{"Relative", "data", "/data", "not an absolute path"},
		{"ReservedTarget", data, "/proc/x", "reserved"},
		{"TargetDotDot", data, "/home/../etc", `contains ".."`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms, names, err := checkMounts([]api.Mount{{Name: "d", Source: tc.src, Target: tc.target, ReadOnly: true}}, roots)
			if err == nil {
				// The names pass; the sources are opened as the user.
				p := &userPaths{out: filepath.Join(t.TempDir(), "out"), mounts: ms, names: names}
				var f *userFiles
				if f, err = openUserPaths(p, os.Getuid(), os.Getgid(), ""); err == nil {
					f.Close()
				}
			}
			if tc.want == "" {
				if err != nil || len(ms) != 1 || !ms[0].ReadOnly {
					t.Fatalf("got %+v, %v", ms, err)
				}
				return
			}
			if !errors.Is(err, ErrMountRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrMountRefused with %q", err, tc.want)
			}
		})
	}
}
