package admission_test

import (
	"maps"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/sched/admission"
	"github.com/troupe-hpc/troupe/sched/partition"
)

// A job may ask only for licenses the partitions file defines, and no
// more of one than its count; each refusal points at the file.
func TestAdmitLicenses(t *testing.T) {
	v := newView(t)
	cfg, diags := partition.Parse("partitions.hcl", []byte(partitions+`
license "matlab" { count = 5 }
license "ansys" { count = 1 }
`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	v.cfg = cfg
	const job = `job "solve" {
  image    = "host"
  command  = ["true"]
  licenses = { matlab = 6, fluent = 1, ansys = 1 }
}
`
	r := refusal(t, firstErr(admission.Admit(fromFile(t, job), v, admission.Settings{}, nil)))
	want := []api.Problem{
		{Path: "licenses.fluent", Position: "train.hcl:4:28", Message: `license "fluent" is not defined; known licenses: matlab (5), ansys (1)`},
		{Path: "licenses.matlab", Position: "train.hcl:4:16", Message: "the job asks for 6 of license matlab, which has 5 in all (its count in the partitions file); it could never start"},
	}
	got := r.API()
	if len(got) != len(want) {
		t.Fatalf("problems %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("problem %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	j, err := admission.Admit(fromFile(t, `job "solve" {
  image    = "host"
  command  = ["true"]
  licenses = { matlab = 5, ansys = 1 }
}
`), v, admission.Settings{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(j.Licenses, map[string]int{"matlab": 5, "ansys": 1}) {
		t.Errorf("admitted licenses %v", j.Licenses)
	}

	// Without license blocks every license is unknown.
	v = newView(t)
	r = refusal(t, firstErr(admission.Admit(fromFile(t, `job "solve" {
  image    = "host"
  command  = ["true"]
  licenses = { matlab = 1 }
}
`), v, admission.Settings{}, nil)))
	if len(r.Problems) != 1 || r.Problems[0].Message != `license "matlab" is not defined; known licenses: none (the partitions file has no license blocks)` {
		t.Errorf("no licenses defined: %+v", r.Problems)
	}
}
