package jobspec_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/troupe-hpc/troupe/jobspec"
)

// FuzzParse feeds arbitrary files to Parse: it must not panic, every
// diagnostic must print, and a job it accepts must validate and expand
// to cluster size containers.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"*.hcl", "broken/*.hcl"} {
		files, _ := filepath.Glob(filepath.Join(jobsDir, pattern))
		for _, p := range files {
			if src, err := os.ReadFile(p); err == nil {
				f.Add(src)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		j, diags := jobspec.Parse("fuzz.hcl", src)
		if err := jobspec.WriteDiagnostics(io.Discard, "fuzz.hcl", src, diags); err != nil {
			t.Fatal(err)
		}
		for _, d := range diags {
			_ = jobspec.FormatDiagnostic(d)
		}
		if (j == nil) != diags.HasErrors() {
			t.Fatalf("job %v with diagnostics:\n%s", j, jobspec.FormatDiagnostics(diags))
		}
		if j == nil {
			return
		}
		if d := j.Validate(); d.HasErrors() {
			t.Fatalf("Validate after Parse:\n%s", jobspec.FormatDiagnostics(d))
		}
		if n := len(j.Containers()); n != j.Cluster.Size {
			t.Fatalf("%d containers, cluster size %d", n, j.Cluster.Size)
		}
	})
}
