package nodelet

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadExampleFile(t *testing.T) {
	f, err := LoadFile("../etc/nodelet.hcl")
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../etc/images.hcl")
	if f.Images != abs || f.AllowedMountRoots == nil || !slices.Contains(*f.AllowedMountRoots, "/shared") || f.PidsLimit != 4096 {
		t.Errorf("etc/nodelet.hcl = %+v", f)
	}
	var c Config
	c.FakeGPUs = 2 // a flag wins
	f.FakeGPUs = 8
	f.Apply(&c)
	if c.FakeGPUs != 2 || c.Images != abs || len(c.AllowedMountRoots) != 3 {
		t.Errorf("applied = %+v", c)
	}
}

func TestLoadFileErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"Unknown", "fake_gpu = 2\n", "line 1"},
		{"RelativeRoot", "allowed_mount_roots = [\"data\"]\n", "not an absolute path"},
		{"Negative", "fake_gpus = -1\n", "must not be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "nodelet.hcl")
			_ = os.WriteFile(p, []byte(tc.src), 0o644)
			if _, err := LoadFile(p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
