package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// squeue's %W and -O Licenses show a job's licenses, as Slurm's do.
func TestSqueueLicenses(t *testing.T) {
	jobs := []api.Job{{ID: 1, Licenses: map[string]int{"matlab": 2, "ansys": 1}}, {ID: 2}}
	short, err := ParseSqueueFormat("%i %W")
	if err != nil {
		t.Fatal(err)
	}
	long, err := ParseSqueueLongFormat("JobID:3,Licenses", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []SqueueFormat{short, long} {
		var b bytes.Buffer
		if err := WriteSqueue(&b, jobs, f, false, time.Now()); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(b.String(), "\n")
		if len(lines) < 2 || strings.Join(strings.Fields(lines[0]), " ") != "1 ansys:1,matlab:2" || strings.Join(strings.Fields(lines[1]), " ") != "2 (null)" {
			t.Errorf("%q", b.String())
		}
	}
}
