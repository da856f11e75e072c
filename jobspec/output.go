package jobspec

import "github.com/troupe-hpc/troupe/internal/outpattern"

// DefaultOutput is the output pattern of a job that names none;
// DefaultArrayOutput that of an element of a job array (package
// outpattern's).
const (
	DefaultOutput      = outpattern.DefaultOutput
	DefaultArrayOutput = outpattern.DefaultArrayOutput
)

// outputEscapes are the letters an output or error pattern may follow
// a % with (Validate refuses any other; expansion keeps it as written).
const outputEscapes = outpattern.Escapes

// OutputVars are what the escapes of a submitted job's output and error
// patterns stand for, for one of its containers.
type OutputVars = outpattern.Vars

// OutputPath expands j's output pattern for v (outpattern.Output).
func (j *Job) OutputPath(v OutputVars) (string, error) { return outpattern.Output(j.Output, v) }

// ErrorPath expands j's error pattern (outpattern.Error); "" when the
// job names none and stderr joins stdout.
func (j *Job) ErrorPath(v OutputVars) (string, error) { return outpattern.Error(j.Error, v) }

// ExpandPattern replaces the escapes of an output or error pattern with
// v's values (outpattern.Expand).
func ExpandPattern(pattern string, v OutputVars) string { return outpattern.Expand(pattern, v) }
