package jobspec_test

import (
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/jobspec"
)

func TestRequeue(t *testing.T) {
	const head = "job \"a\" {\n  image = \"host\"\n  command = [\"true\"]\n"
	j, diags := jobspec.Parse("t.hcl", []byte(head+"  requeue = true\n}"))
	if diags.HasErrors() || !j.Requeue {
		t.Fatalf("requeue = true: got %v\n%s", j, jobspec.FormatDiagnostics(diags))
	}
	j, diags = jobspec.Parse("t.hcl", []byte(head+"}"))
	if diags.HasErrors() || j.Requeue {
		t.Fatalf("no requeue: got requeue %v\n%s", j != nil && j.Requeue, jobspec.FormatDiagnostics(diags))
	}
	_, diags = jobspec.Parse("t.hcl", []byte(head+"  requeue = \"maybe\"\n}"))
	if got := jobspec.FormatDiagnostics(diags); !strings.Contains(got, "t.hcl:4:") || !strings.Contains(got, "requeue") {
		t.Fatalf("requeue = \"maybe\": want an error at t.hcl:4, got\n%s", got)
	}
}
