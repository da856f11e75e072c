package script

import (
	"maps"
	"strings"
	"testing"
)

func TestLicenses(t *testing.T) {
	for _, c := range []struct {
		name, src string
		cmdline   [][2]string
		want      map[string]int
		warn      string // a warning's option, "" none
	}{
		{"sbatch -L", "#!/bin/sh\n#SBATCH -L matlab:2,ansys\n", nil, map[string]int{"matlab": 2, "ansys": 1}, ""},
		{"sbatch --licenses=", "#!/bin/sh\n#SBATCH --licenses=matlab:3\n", nil, map[string]int{"matlab": 3}, ""},
		{"bsub rusage", "#!/bin/sh\n#BSUB -R \"rusage[mem=2GB, matlab=2]\"\n", nil, map[string]int{"matlab": 2}, ""},
		{"rusage colon list", "#!/bin/sh\n#BSUB -R \"rusage[mem=4000:ansys=1:duration=10]\"\n", nil, map[string]int{"ansys": 1}, ""},
		{"rusage built-in ignored", "#!/bin/sh\n#BSUB -R \"rusage[swp=100, matlab=1.0]\"\n", nil, map[string]int{"matlab": 1}, "-R rusage[swp]"},
		{"bsub -R on the command line", "#!/bin/sh\n", [][2]string{{"-R", "rusage[matlab=4]"}}, map[string]int{"matlab": 4}, ""},
		{"none", "#!/bin/sh\n#BSUB -R \"rusage[mem=2GB]\"\n", nil, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, warns := job(t, c.src, c.cmdline)
			if !maps.Equal(j.Licenses, c.want) {
				t.Errorf("licenses %v, want %v", j.Licenses, c.want)
			}
			var opts []string
			for _, w := range warns {
				opts = append(opts, w.Option)
			}
			if c.warn != "" && !strings.Contains(strings.Join(opts, " "), c.warn) {
				t.Errorf("warnings %v, want one for %s", warns, c.warn)
			}
		})
	}
	for _, src := range []string{
		"#!/bin/sh\n#SBATCH -L matlab:0\n",
		"#!/bin/sh\n#SBATCH -L matlab|ansys\n",
		"#!/bin/sh\n#BSUB -R \"rusage[matlab=1.5]\"\n",
	} {
		if _, err := Parse([]byte(src)); err == nil {
			t.Errorf("%q: no error", src)
		}
	}
}
