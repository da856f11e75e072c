package script

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Errors, for errors.Is.
var (
	ErrDirective = errors.New("bad directive")
	ErrScript    = errors.New("bad script")
)

// Kind is what a file given to bsub is.
type Kind int

// The kinds Detect tells apart.
const (
	KindJobFile Kind = iota // a troupe job file (HCL)
	KindScript              // a shell (or other) script, with or without directives
)

// Detect says whether src is a job file or a script. A file named *.hcl
// is a job file; one starting with "#!" or holding a #BSUB or #SBATCH
// directive is a script; otherwise a file whose HCL parses and has a
// top-level block (job, variable, locals) is a job file, and anything
// else a script.
func Detect(name string, src []byte) Kind {
	if strings.EqualFold(filepath.Ext(name), ".hcl") {
		return KindJobFile
	}
	if bytes.HasPrefix(src, []byte("#!")) || hasDirective(src) {
		return KindScript
	}
	if looksLikeHCL(src) {
		return KindJobFile
	}
	return KindScript
}

// hasDirective reports whether a line of src starts with #BSUB or #SBATCH.
func hasDirective(src []byte) bool {
	for line := range bytes.SplitSeq(src, []byte("\n")) {
		if _, _, ok := directive(string(line)); ok {
			return true
		}
	}
	return false
}

// looksLikeHCL reports whether src parses as HCL with at least one block.
func looksLikeHCL(src []byte) bool {
	if !utf8.Valid(src) {
		return false
	}
	f, diags := hclsyntax.ParseConfig(src, "detect.hcl", hcl.InitialPos)
	if diags.HasErrors() || f == nil {
		return false
	}
	body, ok := f.Body.(*hclsyntax.Body)
	return ok && len(body.Blocks) > 0
}

// Dialect is whose directives a line holds.
type Dialect string

// The directive dialects.
const (
	LSF   Dialect = "BSUB"
	Slurm Dialect = "SBATCH"
	// Command is bsub's command line (always LSF's options).
	Command Dialect = "command line"
)

// directive splits "#BSUB -n 4" into its dialect and the rest.
func directive(line string) (Dialect, string, bool) {
	line = strings.TrimRight(line, "\r")
	for _, d := range []Dialect{LSF, Slurm} {
		p := "#" + string(d)
		if strings.HasPrefix(line, p) && (len(line) == len(p) || line[len(p)] == ' ' || line[len(p)] == '\t') {
			return d, line[len(p):], true
		}
	}
	return "", "", false
}

// Warning is something accepted but not (fully) honoured.
type Warning struct {
	Line   int    // 1-based line of the script; 0: the command line
	Option string // the option: "-x", "--mail-type"
	Msg    string
}

func (w Warning) String() string {
	if w.Line == 0 {
		return fmt.Sprintf("%s: %s", w.Option, w.Msg)
	}
	return fmt.Sprintf("line %d: %s: %s", w.Line, w.Option, w.Msg)
}

// Script is a parsed script: its directives and its text.
type Script struct {
	Options Options
	Src     []byte
	// Interpreter is the shebang's program and arguments; empty: /bin/sh.
	Interpreter []string
}

// Parse reads the directives of the script src: every #BSUB and #SBATCH
// line before the first line that is neither blank nor a comment, as LSF
// and Slurm read them. A bad value is an error naming the line; an
// unknown or unsupported option a warning (in Options.Warnings).
func Parse(src []byte) (*Script, error) {
	if bytes.IndexByte(src, 0) >= 0 {
		return nil, fmt.Errorf("%w: holds a NUL byte; is it a binary?", ErrScript)
	}
	if !utf8.Valid(src) {
		return nil, fmt.Errorf("%w: not UTF-8 text", ErrScript)
	}
	s := &Script{Src: src}
	lines := strings.Split(string(src), "\n")
	if len(lines) > 0 && strings.HasPrefix(lines[0], "#!") {
		s.Interpreter = strings.Fields(strings.TrimRight(lines[0][2:], "\r"))
		if len(s.Interpreter) == 0 {
			return nil, fmt.Errorf("%w: line 1: #! names no interpreter", ErrScript)
		}
	}
	for i, line := range lines {
		d, rest, ok := directive(line)
		if !ok {
			t := strings.TrimSpace(line)
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			break
		}
		words, err := split(rest)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: #%s%s: %v", ErrDirective, i+1, d, rest, err)
		}
		if err := s.Options.parseArgs(d, i+1, words); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// split splits a directive's text into words as a shell would: single
// and double quotes, backslash escapes; a word starting with # starts a
// comment.
func split(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // inside a word
		quote byte
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0:
				i++
				cur.WriteByte(s[i])
			default:
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case c == ' ' || c == '\t' || c == '\r':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '#' && !in:
			return words, nil
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
