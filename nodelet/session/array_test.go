package session

import (
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
)

// element is fixture as element 5 of job array 40 (indices 1-9:2).
func element() api.AssignedJob {
	j := fixture()
	j.ArrayID, j.ArrayIndex = 40, 5
	j.ArraySpan = &api.ArraySpan{Min: 1, Max: 9, Count: 5, Step: 2}
	return j
}

func TestArrayEnv(t *testing.T) {
	env, err := Env(element(), "sub1")
	if err != nil {
		t.Fatal(err)
	}
	m := envMap(t, env)
	for k, want := range map[string]string{
		"TROUPE_JOB_ID": "42", "TROUPE_ARRAY_ID": "40", "TROUPE_ARRAY_INDEX": "5",
		"LSB_JOBID": "40", "LSB_JOBINDEX": "5", "LSB_JOBNAME": "train[5]", "LSB_JOBINDEX_END": "9", "LSB_JOBINDEX_STEP": "2",
		"SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "1",
		"SLURM_ARRAY_TASK_MAX": "9", "SLURM_ARRAY_TASK_COUNT": "5", "SLURM_ARRAY_TASK_STEP": "2",
	} {
		if m[k] != want {
			t.Errorf("%s=%q, want %q", k, m[k], want)
		}
	}
	plain, _ := Env(fixture(), "sub1")
	for k := range envMap(t, plain) {
		if k == "LSB_JOBINDEX" || k == "SLURM_ARRAY_TASK_ID" || k == "TROUPE_ARRAY_INDEX" {
			t.Errorf("a job outside an array has %s", k)
		}
	}
}

func TestArrayOutputPath(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{"", "/home/alice/exp/troupe-40_5.main1.out"},
		{"out.%I", "/home/alice/exp/out.5"},
		{"slurm-%A_%a.out", "/home/alice/exp/slurm-40_5.out"},
		{"%j-%I.log", "/home/alice/exp/40-5.log"},
	} {
		j := element()
		j.Spec.Output = tc.pattern
		if got, err := OutputPath(j, "main1"); err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.pattern, got, err, tc.want)
		}
	}
	j := fixture()
	j.Spec.Output = "out.%I"
	if got, _ := OutputPath(j, "main1"); got != "/home/alice/exp/out.0" {
		t.Errorf("%%I outside an array: %q", got)
	}
}
