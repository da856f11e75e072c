package image

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestUntarRefusesEscapes: ".." names and writes through a symlink that
// an earlier entry planted must not leave the target directory.
func TestUntarRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	tests := []struct {
		name    string
		entries []tar.Header
	}{
		{"DotDot", []tar.Header{{Name: "../../" + filepath.Base(outside) + "/pwned", Typeflag: tar.TypeReg, Mode: 0o644}}},
		{"ThroughSymlink", []tar.Header{
			{Name: "link", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "link/pwned", Typeflag: tar.TypeReg, Mode: 0o644},
		}},
		{"HardlinkOut", []tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range tc.entries {
				_ = tw.WriteHeader(&h)
			}
			_ = tw.Close()
			_ = Untar(&buf, t.TempDir())
			if _, err := os.Stat(filepath.Join(outside, "pwned")); err == nil {
				t.Fatal("untar wrote outside its directory")
			}
		})
	}
}

func TestDetect(t *testing.T) {
	dir := t.TempDir()
	layout := filepath.Join(dir, "layout")
	_ = os.MkdirAll(layout, 0o755)
	_ = os.WriteFile(filepath.Join(layout, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	junk := filepath.Join(dir, "junk.bin")
	_ = os.WriteFile(junk, []byte("nothing"), 0o644)
	for ref, want := range map[string]Kind{"host": KindHost, "": KindHost, dir: KindRootfs, layout: KindOCILayout} {
		if got, err := Detect(ref); got != want || err != nil {
			t.Errorf("Detect(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	if _, err := Detect(junk); err == nil {
		t.Error("Detect(junk) succeeded")
	}
	if _, err := Detect("relative.sif"); err == nil {
		t.Error("Detect(relative) succeeded")
	}
}
