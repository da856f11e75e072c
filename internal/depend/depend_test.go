package depend

import "testing"

// TestEval: each kind of condition against each state of the job it
// names (the table of bsub -w).
func TestEval(t *testing.T) {
	pending := JobStatus{}
	running := JobStatus{Started: true}
	completed := JobStatus{Started: true, Ended: true, Completed: true}
	failed := JobStatus{Started: true, Ended: true}
	cancelled := JobStatus{Ended: true} // never started
	for _, tt := range []struct {
		kind Kind
		want [5]Status // pending, running, completed, failed, cancelled
	}{
		{Done, [5]Status{Waiting, Waiting, Satisfied, Never, Never}},
		{Exit, [5]Status{Waiting, Waiting, Never, Satisfied, Satisfied}},
		{Ended, [5]Status{Waiting, Waiting, Satisfied, Satisfied, Satisfied}},
		{Started, [5]Status{Waiting, Satisfied, Satisfied, Satisfied, Satisfied}},
		{"later", [5]Status{Waiting, Waiting, Waiting, Waiting, Waiting}}, // no kind: never decided
	} {
		for i, s := range []JobStatus{pending, running, completed, failed, cancelled} {
			if got := tt.kind.Eval(s); got != tt.want[i] {
				t.Errorf("%s of %+v: %s, want %s", tt.kind, s, got, tt.want[i])
			}
		}
	}
}

// TestNames: every kind has its Slurm name, read back in any case, and
// the words list them all.
func TestNames(t *testing.T) {
	for _, k := range Kinds {
		if !k.Valid() || k.Slurm() == "" {
			t.Errorf("kind %s: valid %v, Slurm name %q", k, k.Valid(), k.Slurm())
		}
		for _, name := range []string{k.Slurm(), "AFTER" + k.Slurm()[len("after"):]} {
			if got, ok := FromSlurm(name); !ok || got != k {
				t.Errorf("FromSlurm(%q) = %s, %v; want %s", name, got, ok, k)
			}
		}
	}
	if k := Kind("afterok"); k.Valid() || k.Slurm() != "" {
		t.Errorf("Slurm's afterok taken as a kind")
	}
	if _, ok := FromSlurm("done"); ok {
		t.Errorf("FromSlurm took LSF's done")
	}
	if got, want := LSFNames(), "done, exit, ended or started"; got != want {
		t.Errorf("LSFNames() = %q, want %q", got, want)
	}
	if got, want := SlurmNames(), "afterok, afternotok, afterany or after"; got != want {
		t.Errorf("SlurmNames() = %q, want %q", got, want)
	}
}
