// Package depend is the one vocabulary of job dependencies (bsub -w,
// sbatch --dependency): the kinds of condition with their LSF and Slurm
// names, where a condition stands, and the rule that decides it from the
// state of the job it names. The /v1 API (internal/api), the
// command-line tools and the scheduling core (sched/core, whose verdict
// schedd and bsim both use) all take them from here. It imports only the
// standard library, so the pure core may import it; add a kind here,
// never as a string elsewhere.
package depend

import "strings"

// Kind is what a condition waits for in another job, by LSF's name.
type Kind string

// The kinds, by LSF's names; Slurm's are in Kind.Slurm.
const (
	Done    Kind = "done"    // the job COMPLETED (Slurm afterok)
	Exit    Kind = "exit"    // the job ended other than COMPLETED (Slurm afternotok)
	Ended   Kind = "ended"   // the job ended, however (Slurm afterany)
	Started Kind = "started" // the job started, or ended without starting (Slurm after)
)

// Kinds lists every kind, in the order the help names them.
var Kinds = []Kind{Done, Exit, Ended, Started}

// slurm is each kind's Slurm --dependency type.
var slurm = map[Kind]string{Done: "afterok", Exit: "afternotok", Ended: "afterany", Started: "after"}

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool { _, ok := slurm[k]; return ok }

// Slurm is k's Slurm name ("afterok" for done), "" for no kind.
func (k Kind) Slurm() string { return slurm[k] }

// FromSlurm is the kind of Slurm's type name (any case), false for none.
func FromSlurm(name string) (Kind, bool) {
	name = strings.ToLower(name)
	for _, k := range Kinds {
		if slurm[k] == name {
			return k, true
		}
	}
	return "", false
}

// LSFNames is the kinds in words: "done, exit, ended or started".
func LSFNames() string { return words(func(k Kind) string { return string(k) }) }

// SlurmNames is the Slurm types in words: "afterok, afternotok,
// afterany or after".
func SlurmNames() string { return words(Kind.Slurm) }

func words(name func(Kind) string) string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = name(k)
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Status is where a condition, or a whole dependency, stands.
type Status string

// The statuses.
const (
	Waiting   Status = "waiting"   // may still be satisfied
	Satisfied Status = "satisfied" // is satisfied
	Never     Status = "never"     // can never be satisfied
)

// JobStatus is what a condition asks of the job it names.
type JobStatus struct {
	// Started: the job started (was placed) at some time.
	Started bool
	// Ended: the job is over, however it ended.
	Ended bool
	// Completed: it ended COMPLETED (implies Ended).
	Completed bool
}

// Eval is where a condition of kind k stands, the job it names being s:
// the one rule.
func (k Kind) Eval(s JobStatus) Status {
	switch k {
	case Done:
		switch {
		case s.Completed:
			return Satisfied
		case s.Ended:
			return Never
		}
	case Exit:
		switch {
		case s.Completed:
			return Never
		case s.Ended:
			return Satisfied
		}
	case Ended:
		if s.Ended {
			return Satisfied
		}
	case Started:
		if s.Ended || s.Started {
			return Satisfied
		}
	}
	return Waiting
}
