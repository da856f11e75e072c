package partition

import (
	"maps"
	"slices"
	"testing"
)

func TestLicenses(t *testing.T) {
	c, diags := ParseFile("../../etc/partitions.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if l := c.License("matlab"); l == nil || l.Count != 20 {
		t.Fatalf("matlab in the example file: %+v", l)
	}
	src := `
partition "cpu" { nodes = ["n1"] }
license "matlab" { count = 20 }
license "ansys" { count = 1 }
`
	c, diags = Parse("p.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if got := c.LicenseNames(); !slices.Equal(got, []string{"matlab", "ansys"}) {
		t.Errorf("names %v, want file order", got)
	}
	if got := c.LicenseCounts(); !maps.Equal(got, map[string]int{"matlab": 20, "ansys": 1}) {
		t.Errorf("counts %v", got)
	}
	if c.License("abaqus") != nil {
		t.Error("a license the file does not define is found")
	}
	if Default().LicenseCounts() != nil {
		t.Error("the built-in config has licenses")
	}
}
