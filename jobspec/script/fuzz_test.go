package script

import (
	"testing"
)

// FuzzParse feeds arbitrary scripts to Parse and Job: no panic, and a
// job built from a script that parses names a command and a workdir.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"#!/bin/bash\n#BSUB -n 4 -R \"span[ptile=2] rusage[mem=4GB]\"\n#BSUB -o out.%J\necho\n",
		"#SBATCH -N 2 --ntasks-per-node=4 --mem=4G -t 1-00:00\nsrun hostname\n",
		"#BSUB -env \"all, ~A\" -x -cwd /tmp\n",
		"#SBATCH --export=NONE,A=1 --gres=gpu:2\n",
		"#!/usr/bin/env python3\nprint(1)\n",
		"#BSUB -J 'a b' -W 1:30\n#BSUB -w 'done(3)'\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		_ = Detect("fuzz", src)
		s, err := Parse(src)
		if err != nil {
			return
		}
		for _, w := range s.Options.Warnings {
			_ = w.String()
		}
		j, err := s.Options.Job(Submit{Cwd: "/tmp/sub", Environ: []string{"A=1"}, Script: s, Name: "fuzz.sh"})
		if err != nil {
			return
		}
		if len(j.Command) == 0 || j.Workdir == "" || j.Cluster.Size < 1 {
			t.Fatalf("job without command, workdir or size: %+v", j)
		}
	})
}
