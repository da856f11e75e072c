package jobspec_test

import (
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/jobspec"
)

func TestSSH(t *testing.T) {
	const head = "job \"a\" {\n  image = \"host\"\n  command = [\"true\"]\n"
	j, diags := jobspec.Parse("t.hcl", []byte(head+"  ssh = true\n}"))
	if diags.HasErrors() || !j.SSH {
		t.Fatalf("ssh = true: got %v\n%s", j, jobspec.FormatDiagnostics(diags))
	}
	j, diags = jobspec.Parse("t.hcl", []byte(head+"}"))
	if diags.HasErrors() || j.SSH {
		t.Fatalf("no ssh: got ssh %v\n%s", j != nil && j.SSH, jobspec.FormatDiagnostics(diags))
	}
	_, diags = jobspec.Parse("t.hcl", []byte(head+"  ssh = \"yes\"\n}"))
	if got := jobspec.FormatDiagnostics(diags); !strings.Contains(got, "t.hcl:4:") || !strings.Contains(got, "ssh") {
		t.Fatalf("ssh = \"yes\": want an error at t.hcl:4, got\n%s", got)
	}
}
