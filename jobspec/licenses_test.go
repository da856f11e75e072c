package jobspec_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/jobspec"
)

func TestLicenses(t *testing.T) {
	j, diags := jobspec.Parse("job.hcl", []byte(`job "solve" {
  image    = "host"
  command  = ["true"]
  licenses = { matlab = 2, ansys = 1 }
}
`))
	if diags.HasErrors() {
		t.Fatal(jobspec.FormatDiagnostics(diags))
	}
	if !maps.Equal(j.Licenses, map[string]int{"matlab": 2, "ansys": 1}) {
		t.Fatalf("licenses %v", j.Licenses)
	}
	if r := j.Range("licenses.ansys"); r == nil || r.Start.Line != 4 || r.Start.Column != 28 {
		t.Errorf("licenses.ansys written at %v, want line 4 col 28", r)
	}

	_, diags = jobspec.Parse("job.hcl", []byte(`job "solve" {
  image    = "host"
  command  = ["true"]
  licenses = { matlab = 0, "1x" = 1, ansys = 1.5 }
}
`))
	got := jobspec.FormatDiagnostics(diags)
	for _, want := range []string{
		`job.hcl:4:16: Invalid license count; licenses.matlab = 0 is not valid`,
		`job.hcl:4:28: Invalid license name; License name "1x" is not valid`,
		`job.hcl:4:38: Invalid license count; licenses.ansys = 1.5 is not valid; a license count is a whole number`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, got)
		}
	}
}
