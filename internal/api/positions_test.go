package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/wire"
)

// PositionsOf gives each setting's line and column as the parse found
// them, and none for a job of more than MaxPositions settings.
func TestPositionsOf(t *testing.T) {
	parse := func(src string) *jobspec.Job {
		t.Helper()
		spec, diags := jobspec.Parse("job.hcl", []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return spec
	}
	spec := parse("job \"a\" {\n  image   = \"host\"\n  command = [\"true\"]\n  walltime = \"1h\"\n}\n")
	pos := wire.PositionsOf(spec)
	if got, want := pos["walltime"], (api.SourcePos{Line: 4, Column: 14}); got != want {
		t.Errorf("walltime at %+v, want %+v (all: %v)", got, want, pos)
	}
	if wire.PositionsOf(&jobspec.Job{}) != nil {
		t.Error("a spec from no file has positions")
	}
	var env strings.Builder
	for i := range api.MaxPositions {
		fmt.Fprintf(&env, "    V%d = \"x\"\n", i)
	}
	big := parse("job \"a\" {\n  image   = \"host\"\n  command = [\"true\"]\n  env = {\n" + env.String() + "  }\n}\n")
	if n := len(big.Ranges); n <= api.MaxPositions || wire.PositionsOf(big) != nil {
		t.Errorf("%d settings: positions sent", n)
	}
}
