package api

import (
	"errors"
	"fmt"
	"strings"

	"github.com/troupe-hpc/troupe/internal/depend"
)

// DepKind is what a dependency waits for in another job: LSF's
// conditions, with Slurm's names (package depend holds the vocabulary
// and the rule; these are its names in the API).
type DepKind = depend.Kind

// Dependency kinds.
const (
	DepDone    = depend.Done    // the job COMPLETED (Slurm afterok)
	DepExit    = depend.Exit    // the job ended other than COMPLETED (Slurm afternotok)
	DepEnded   = depend.Ended   // the job ended, however (Slurm afterany)
	DepStarted = depend.Started // the job started, or ended without starting (Slurm after)
)

// DepStatus is where one condition stands. The server fills it in when
// it answers (it is derived, never stored), from the scheduler core's
// verdict (sched/core Dependency.Status, each condition by package
// depend's rule).
type DepStatus = depend.Status

// Dependency statuses.
const (
	DepWaiting   = depend.Waiting   // may still be satisfied
	DepSatisfied = depend.Satisfied // is satisfied
	DepNever     = depend.Never     // can never be satisfied
)

// Condition is one term of a dependency: Kind of job JobID.
type Condition struct {
	Kind  DepKind `json:"kind"`
	JobID uint64  `json:"job_id"`
	// Index, when set, names one element of job array JobID
	// (done(12[5])); without it a condition on an array is on the whole
	// (done(12): every element COMPLETED).
	Index *int `json:"index,omitempty"`
	// Status and JobState describe the condition as the server answered
	// (read-time only, not part of a submission).
	Status   DepStatus `json:"status,omitempty"`
	JobState JobState  `json:"job_state,omitempty"`
}

// Dependency is a job's dependency (bsub -w), one normalized form for
// LSF's and Slurm's syntax: Conditions all hold (&&, Slurm ','), or with
// Any one of them does (||, Slurm '?').
type Dependency struct {
	Any        bool        `json:"any,omitempty"`
	Conditions []Condition `json:"conditions"`
}

// MaxConditions bounds the terms of one dependency.
const MaxConditions = 64

// String is the dependency in LSF syntax: "done(12) && ended(13)".
func (d *Dependency) String() string {
	if d == nil {
		return ""
	}
	op := " && "
	if d.Any {
		op = " || "
	}
	parts := make([]string, len(d.Conditions))
	for i, c := range d.Conditions {
		parts[i] = c.String()
	}
	return strings.Join(parts, op)
}

// String is "done(12)".
func (c Condition) String() string { return fmt.Sprintf("%s(%s)", c.Kind, c.Ref()) }

// Ref is the job the condition names: "12" or "12[5]".
func (c Condition) Ref() JobRef {
	if c.Index != nil {
		return JobRef{ID: c.JobID, Index: *c.Index, Element: true}
	}
	return JobRef{ID: c.JobID}
}

// Validate checks a dependency as a submission carries it.
func (d *Dependency) Validate() error {
	switch {
	case len(d.Conditions) == 0:
		return errors.New("dependency without conditions")
	case len(d.Conditions) > MaxConditions:
		return fmt.Errorf("dependency of %d conditions; at most %d", len(d.Conditions), MaxConditions)
	}
	for _, c := range d.Conditions {
		if !c.Kind.Valid() {
			return fmt.Errorf("dependency condition %q: want %s", c.Kind, depend.LSFNames())
		}
		if c.JobID == 0 {
			return fmt.Errorf("dependency %s: job ids start at 1", c)
		}
	}
	return nil
}

// ParseDependency reads bsub -w's expression in either syntax:
//
//	LSF:   done(12) && ended(13)     exit(12) || started(13)
//	Slurm: afterok:12:13,afterany:14 afterok:12?afternotok:13
//
// LSF's bare job id ("12") means done(12). Terms are joined all with &&
// (Slurm ',') or all with || (Slurm '?'); mixing both is refused.
func ParseDependency(s string) (*Dependency, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty dependency expression")
	}
	var (
		d   *Dependency
		err error
	)
	if strings.Contains(s, "(") || !strings.Contains(s, ":") {
		d, err = parseLSF(s)
	} else {
		d, err = parseSlurm(s)
	}
	if err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("dependency %q: %w", s, err)
	}
	return d, nil
}

// splitTerms splits s at all (every term must hold) or anyOf (one
// suffices), refusing a mix; anyOf tells which it was.
func splitTerms(s, all, anyOf string) (terms []string, oneOf bool, err error) {
	hasAll, hasAny := strings.Contains(s, all), strings.Contains(s, anyOf)
	if hasAll && hasAny {
		show := func(sep string) string { // && as it is, ',' quoted
			if len(sep) == 1 {
				return "'" + sep + "'"
			}
			return sep
		}
		return nil, false, fmt.Errorf("dependency %q mixes %s and %s: join all terms with one of them", s, show(all), show(anyOf))
	}
	if hasAny {
		return strings.Split(s, anyOf), true, nil
	}
	return strings.Split(s, all), false, nil
}

func parseLSF(s string) (*Dependency, error) {
	terms, oneOf, err := splitTerms(s, "&&", "||")
	if err != nil {
		return nil, err
	}
	d := &Dependency{Any: oneOf}
	for _, term := range terms {
		term = strings.TrimSpace(term)
		kind, id := "done", term
		open := strings.IndexByte(term, '(')
		if _, err := ParseJobRef(term); open < 0 && err != nil {
			return nil, fmt.Errorf("dependency term %q: want condition(jobid) such as done(12), a bare job id, or Slurm's afterok:12", term)
		}
		if open >= 0 {
			if !strings.HasSuffix(term, ")") {
				return nil, fmt.Errorf("dependency term %q: want condition(jobid), e.g. done(12)", term)
			}
			kind, id = strings.TrimSpace(term[:open]), strings.TrimSpace(term[open+1:len(term)-1])
		}
		k := DepKind(strings.ToLower(kind))
		if !k.Valid() {
			return nil, fmt.Errorf("dependency term %q: unknown condition %q; use %s (LSF), or %s (Slurm)", term, kind, depend.LSFNames(), depend.SlurmNames())
		}
		ref, err := ParseJobRef(id)
		if err != nil {
			return nil, fmt.Errorf("dependency term %q: %w", term, err)
		}
		d.Conditions = append(d.Conditions, ref.condition(k))
	}
	return d, nil
}

// condition is a condition of kind k on r.
func (r JobRef) condition(k DepKind) Condition {
	c := Condition{Kind: k, JobID: r.ID}
	if r.Element {
		i := r.Index
		c.Index = &i
	}
	return c
}

func parseSlurm(s string) (*Dependency, error) {
	terms, oneOf, err := splitTerms(s, ",", "?")
	if err != nil {
		return nil, err
	}
	d := &Dependency{Any: oneOf}
	for _, term := range terms {
		fields := strings.Split(strings.TrimSpace(term), ":")
		k, ok := depend.FromSlurm(fields[0])
		if !ok {
			return nil, fmt.Errorf("dependency term %q: unknown type %q; use %s (Slurm), or %s (LSF)", term, fields[0], depend.SlurmNames(), depend.LSFNames())
		}
		if len(fields) < 2 {
			return nil, fmt.Errorf("dependency term %q: want %s:jobid[:jobid...]", term, fields[0])
		}
		for _, id := range fields[1:] {
			if j, _, plus := strings.Cut(id, "+"); plus {
				return nil, fmt.Errorf("dependency term %q: a delay (%s+minutes) is not supported", term, j)
			}
			ref, err := ParseJobRef(slurmElement(id))
			if err != nil {
				return nil, fmt.Errorf("dependency term %q: %w", term, err)
			}
			d.Conditions = append(d.Conditions, ref.condition(k))
		}
	}
	return d, nil
}

// slurmElement turns Slurm's array element "12_5" into "12[5]".
func slurmElement(s string) string {
	if id, idx, ok := strings.Cut(s, "_"); ok {
		return id + "[" + idx + "]"
	}
	return s
}
