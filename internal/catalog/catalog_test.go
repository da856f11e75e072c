package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadResolve(t *testing.T) {
	c, err := Load("../../etc/images.hcl")
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Resolve("pytorch-2.3")
	if err != nil || !strings.HasSuffix(s.Path, ".sif") {
		t.Fatalf("pytorch-2.3 = %+v, %v", s, err)
	}
	_, err = c.Resolve("pytorch-9")
	if !errors.Is(err, ErrUnknownImage) || !strings.Contains(err.Error(), "known images: ") ||
		!strings.Contains(err.Error(), "pytorch-2.3") {
		t.Errorf("unknown name: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"Syntax", "image \"a\" {\n  source = \n}\n", "images.hcl line 2"},
		{"Relative", "image \"a\" { source = \"x.sif\" }\n", "must be an absolute path"},
		{"Dup", "image \"a\" { source = \"/a\" }\nimage \"a\" { source = \"/b\" }\n", "defined twice"},
		{"Missing", "image \"a\" {}\n", "source"},
		{"NullSource", "image \"a\" {\n  source = null\n}\n", "images.hcl line 2, in image \"a\""},
		{"NullSourceWhy", "image \"a\" { source = null }\n", "source is null"},
		{"Type", "image \"a\" { source = [\"/a\"] }\n", "string required"},
		{"NoLabel", "image { source = \"/a\" }\n", "Missing name for image"},
		{"Unknown", "image \"a\" {\n  source = \"/a\"\n  sources = \"/b\"\n}\n", "images.hcl line 3"},
		{"BadName", "image \"-a\" { source = \"/a\" }\n", "want letters"},
		{"Host", "image \"host\" { source = \"/a\" }\n", "not \\\"host\\\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "images.hcl")
			_ = os.WriteFile(p, []byte(tc.src), 0o644)
			_, err := Load(p)
			if err == nil || !strings.Contains(err.Error(), strings.ReplaceAll(tc.want, `\"`, `"`)) {
				t.Errorf("Load = %v, want error containing %q", err, tc.want)
			}
		})
	}
}

// TestNameOK: letters and digits first, then also '_', '.', ':' and '-'.
func TestNameOK(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "pytorch-2.3": true, "Ubuntu_22.04:x": true, "9": true,
		"": false, "-a": false, ".a": false, "_a": false, ":a": false, "a/b": false, "a b": false, "é": false, "a\n": false,
	} {
		if nameOK(name) != want {
			t.Errorf("nameOK(%q) = %v, want %v", name, !want, want)
		}
	}
}
