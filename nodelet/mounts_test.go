package nodelet

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/jobspec"
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
		{"SymlinkInside", filepath.Join(root, "alias"), "/data", ""},
		{"Outside", outside, "/data", "outside the allowed roots"},
		{"DotDot", data + "/../../etc", "/data", `contains ".."`},
		{"SymlinkEscape", filepath.Join(root, "escape"), "/data", "resolves through a symlink"},
		{"Missing", filepath.Join(root, "nope"), "/data", "no such file"},
		{"Relative", "data", "/data", "not an absolute path"},
		{"ReservedTarget", data, "/proc/x", "reserved"},
		{"TargetDotDot", data, "/home/../etc", `contains ".."`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := checkMounts([]jobspec.Mount{{Name: "d", Source: tc.src, Target: tc.target, ReadOnly: true}}, roots)
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
