// Package outpattern expands a job's output and error patterns (bsub -o
// and -e: %j job id, %h host, …) into the paths its containers write,
// for schedd, the nodes and the tools that read a job's output (bpeek).
// It is a leaf: it imports nothing of troupe's.
package outpattern

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultOutput is the output pattern of a job that names none;
// DefaultArrayOutput that of an element of a job array (one file per
// element, as Slurm's slurm-%A_%a.out).
const (
	DefaultOutput      = "troupe-%j.%h.out"
	DefaultArrayOutput = "troupe-%j_%I.%h.out"
)

// Escapes are the letters an output or error pattern may follow
// a % with (Validate refuses any other; expansion keeps it as written).
const Escapes = "jJAIahu%"

// Vars are what the escapes of a submitted job's output and error
// patterns stand for, for one of its containers.
type Vars struct {
	JobID      uint64 // the job's own id (for messages)
	ArrayID    uint64 // the array's id; 0: the job is no array element
	ArrayIndex int    // the element's index in its array
	Host       string // the container's hostname (main1, sub1, ...)
	User       string // the job's user name
	Cwd        string // the submit directory: relative paths resolve in it
}

// Output expands output pattern pattern (a job's; "" its default) for
// v: %j (or LSF's and a
// batch script's %J) job id, %h host,
// %u user name, %I and %a an array element's index (0 for a job not in
// an array), %A the array's id (the job's for another), %% a literal %;
// an unknown %x stays as written. For an element of a job array %j is
// the array's id, as bsub said it and as LSF's %J is. A relative result
// is resolved against v.Cwd.
func Output(pattern string, v Vars) (string, error) {
	switch {
	case pattern != "":
	case v.ArrayID != 0:
		pattern = DefaultArrayOutput
	default:
		pattern = DefaultOutput
	}
	return v.path("output", pattern)
}

// Error expands error pattern pattern (bsub -e) as Output does; ""
// when the job names none and stderr joins stdout.
func Error(pattern string, v Vars) (string, error) {
	if pattern == "" {
		return "", nil
	}
	return v.path("error", pattern)
}

func (v Vars) path(what, pattern string) (string, error) {
	p := Expand(pattern, v)
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	if !filepath.IsAbs(v.Cwd) {
		return "", fmt.Errorf("%s %q is relative and job %d has no absolute cwd (%q)", what, p, v.JobID, v.Cwd)
	}
	return filepath.Join(v.Cwd, p), nil
}

// ExpandPattern replaces the escapes of an output or error pattern
// (see Output) with v's values; it does not resolve the result.
func Expand(pattern string, v Vars) string {
	id, idx := v.JobID, 0
	if v.ArrayID != 0 {
		id, idx = v.ArrayID, v.ArrayIndex
	}
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		if pattern[i] != '%' || i+1 == len(pattern) || strings.IndexByte(Escapes, pattern[i+1]) < 0 {
			b.WriteByte(pattern[i])
			continue
		}
		i++
		switch pattern[i] {
		case 'j', 'J', 'A':
			b.WriteString(strconv.FormatUint(id, 10))
		case 'I', 'a':
			b.WriteString(strconv.Itoa(idx))
		case 'h':
			b.WriteString(v.Host)
		case 'u':
			b.WriteString(v.User)
		case '%':
			b.WriteByte('%')
		}
	}
	return b.String()
}
