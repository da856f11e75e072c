package cmd

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsStandAlone: the repository stands alone. No Markdown page,
// manual page or Go file (its comments above all) names a file the
// repository does not hold: a design or style file kept beside it, or
// the directory of shared material next to a checkout. What such a file
// said belongs in docs/ or the man pages, in the repository's own words.
// (The Makefile may offer a traces directory beside the checkout as a
// default for bsim's tests; it is not read here.)
func TestDocsStandAlone(t *testing.T) {
	// Spelled in pieces so that this file does not name them itself.
	outside := []string{"DESIGN" + ".md", "STYLE" + ".md", ".." + "/shared", "/work" + "/shared"}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "libexec" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !isDoc(path, root) {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		checked++
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
		for n := 1; sc.Scan(); n++ {
			for _, o := range outside {
				if strings.Contains(sc.Text(), o) {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s:%d names %q, outside the repository: say what it says here, or cite docs/ or a man page", rel, n, o)
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d files under %s: the walk did not find the repository's docs and code", checked, root)
	}
}

// isDoc reports whether path is a Markdown page, a manual page (man/*.N)
// or a Go file.
func isDoc(path, root string) bool {
	switch filepath.Ext(path) {
	case ".md", ".go":
		return true
	}
	dir, _ := filepath.Rel(root, filepath.Dir(path))
	ext := filepath.Ext(path)
	return dir == "man" && len(ext) == 2 && ext[1] >= '1' && ext[1] <= '8'
}
