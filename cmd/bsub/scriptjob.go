package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/troupe-hpc/troupe/internal/cli"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/script"
)

// EnvScriptImage names the site's image for script and command-line jobs
// (default: "host", the node's own tree).
const EnvScriptImage = "TROUPE_SCRIPT_IMAGE"

// lsfOnly are LSF's options bsub takes for scripts and command lines
// only (a job file sets these things itself); defineLSF defines them.
var lsfOnly = []string{"nnodes", "oo", "eo", "G", "cwd", "R", "M", "gpu", "app", "image",
	"x", "L", "B", "N", "u", "sp", "r", "rn", "b", "i"}

// defineLSF defines the LSF options bsub has for script and command-line
// jobs only; jobspec/script reads them (troupe-job(5), SCRIPT JOBS).
func defineLSF(fs *cli.FlagSet) {
	fs.String("nnodes", "", "scripts and command lines: spread the -n slots over `N` containers (multi-node)")
	fs.String("oo", "", "scripts and command lines: as -o (`pattern`)")
	fs.String("eo", "", "scripts and command lines: as -e (`pattern`)")
	fs.String("G", "", "scripts and command lines: fair-share user `group`, charged as the account unless -P")
	fs.String("cwd", "", "scripts and command lines: run in `dir` (default: this directory)")
	fs.Var(&cli.StringList{}, "R", "scripts and command lines: resource `requirement` (repeatable): span[hosts=1],\nspan[ptile=K], rusage[mem=M], select[mem>=M], rusage[ngpus_physical=G]")
	fs.String("M", "", "scripts and command lines: memory `limit` per container, KB unless a unit (MB, GB) is given")
	fs.String("gpu", "", "scripts and command lines: GPUs per container, LSF's `num=N`")
	fs.String("app", "", "scripts and command lines: the `image` (troupe's reading of LSF's application profile)")
	fs.String("image", "", "scripts and command lines: the `image` (default: $"+EnvScriptImage+", else host)")
	fs.Bool("x", false, "accepted and ignored with a warning: exclusive nodes")
	fs.String("L", "", "accepted and ignored with a warning: login `shell`")
	fs.Bool("B", false, "scripts and command lines: mail when the job starts (through the node's sendmail)")
	fs.Bool("N", false, "scripts and command lines: mail when the job ends")
	fs.String("u", "", "scripts and command lines: mail `address`es for -B and -N, comma-separated (default: you)")
	fs.String("sp", "", "accepted and ignored with a warning: user `priority`")
	fs.Bool("r", false, "accepted and ignored with a warning: rerunnable")
	fs.Bool("rn", false, "accepted and ignored with a warning: not rerunnable")
	fs.String("b", "", "accepted and ignored with a warning: begin `time`")
	fs.String("i", "", "accepted and ignored with a warning: input `file`")
}

// commandLineName maps bsub's own spellings of LSF options to LSF's.
var commandLineName = map[string]string{
	"partition": "q", "cluster-size": "n", "A": "P", "reservation": "U",
}

// bsubOwn are bsub's flags that are not job options.
var bsubOwn = map[string]bool{
	"addr": true, "timeout": true, "wait": true, "K": true, "H": true, "hold": true,
	"w": true, "dependency": true, "I": true, "Is": true, "interactive": true,
	"var": true, "dry-run": true, "env": true, "array": true, "m": true,
}

// what is what bsub was given to run.
type what struct {
	jobFile string // a job file's path ("" if not a job file)
	src     []byte // its text, or the script's
	script  *script.Script
	name    string   // the script's file name ("" for stdin)
	command []string // a command line's words, or the script's arguments
	source  string   // for the request: path, "stdin" or "command line"
}

// classify decides what rest (the arguments from the first positional
// on) names: a job file, a script, or a command line; with no argument,
// stdin is read (a job file or a script).
func classify(rest []string, stdin io.Reader, stdinTTY bool) (what, error) {
	if len(rest) == 0 {
		if stdinTTY || stdin == nil {
			return what{}, errUsage("missing job file, script or command (or a script on stdin)")
		}
		src, err := io.ReadAll(stdin)
		if err != nil {
			return what{}, fmt.Errorf("reading stdin: %w", err)
		}
		if len(strings.TrimSpace(string(src))) == 0 {
			return what{}, errUsage("missing job file, script or command (and stdin is empty)")
		}
		if script.Detect("stdin", src) == script.KindJobFile {
			return what{jobFile: "stdin", src: src, source: "stdin"}, nil
		}
		return scriptOf(src, "", nil, "stdin")
	}
	first := rest[0]
	st, err := os.Stat(first)
	switch {
	case err == nil && st.Mode().IsRegular():
		src, err := os.ReadFile(first)
		if err != nil {
			return what{}, err
		}
		switch {
		case script.Detect(first, src) == script.KindJobFile:
			return what{jobFile: first, src: src, source: first}, nil
		case strings.HasPrefix(string(src), "#!") || hasDirective(src):
			return scriptOf(src, filepath.Base(first), rest[1:], first)
		case st.Mode()&0o111 != 0:
			return what{command: rest, source: "command line"}, nil
		}
		// Neither HCL nor a script nor a program: read as a job file so
		// that its errors show.
		return what{jobFile: first, src: src, source: first}, nil
	case err == nil:
		return what{}, fmt.Errorf("%s is a %s, not a job file or script", first, st.Mode().Type())
	case strings.HasSuffix(first, ".hcl"):
		// A job file that is not there: its reading says so, after the
		// flags are checked.
		return what{jobFile: first, source: first}, nil
	case strings.HasSuffix(first, ".sh"):
		return what{}, err // a missing script, not a command
	}
	return what{command: rest, source: "command line"}, nil
}

func hasDirective(src []byte) bool {
	for line := range strings.SplitSeq(string(src), "\n") {
		if strings.HasPrefix(line, "#BSUB") || strings.HasPrefix(line, "#SBATCH") {
			return true
		}
	}
	return false
}

func scriptOf(src []byte, name string, args []string, source string) (what, error) {
	s, err := script.Parse(src)
	if err != nil {
		return what{}, fmt.Errorf("%s: %w", source, err)
	}
	return what{script: s, src: src, name: name, command: args, source: source}, nil
}

// usageError is a mistake in how bsub was called (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func errUsage(msg string) error { return usageError{msg} }

// scriptJob builds the job of a script or command line: the script's
// directives, then bsub's options (which win), then the mapping of
// jobspec/script. Warnings go to stderr, once each.
func scriptJob(fs *cli.FlagSet, w what, ov *overrides, stderr io.Writer) (*jobspec.Job, *script.Options, error) {
	var opts script.Options
	if w.script != nil {
		opts = w.script.Options
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil || bsubOwn[f.Name] {
			return
		}
		name := f.Name
		if n, ok := commandLineName[name]; ok {
			name = n
		}
		values := []string{f.Value.String()}
		if l, ok := f.Value.(*cli.StringList); ok {
			values = *l // -R, given more than once
		}
		for _, v := range values {
			var known bool
			known, err = opts.Set("-"+name, v)
			if err == nil && !known {
				err = fmt.Errorf("-%s: not an option of script jobs", name)
			}
			if err != nil {
				return
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	for _, kv := range ov.env {
		// troupe's --env NAME=value adds to the environment; LSF's -env
		// ("all", "none", "all, ~VAR", "A, B") sets the policy.
		k, v, ok := strings.Cut(kv, "=")
		if ok && !strings.ContainsAny(kv, ",~") && k != "" && !strings.EqualFold(kv, "all") {
			if opts.Env.Values == nil {
				opts.Env.Values = map[string]string{}
			}
			opts.Env.Values[k] = v
			continue
		}
		if _, err := opts.Set("-env", kv); err != nil {
			return nil, nil, err
		}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, nil, err
	}
	sub := script.Submit{Cwd: cwd, Environ: os.Environ(), DefaultImage: os.Getenv(EnvScriptImage), Script: w.script, Name: w.name, Args: w.command}
	if w.script == nil {
		sub.Command, sub.Args = w.command, nil
	}
	spec, err := opts.Job(sub)
	for _, warn := range opts.Warnings {
		where := w.source
		if warn.Line == 0 {
			where = "command line"
		}
		fmt.Fprintf(stderr, "%s: warning: %s: %s\n", prog, where, warn)
	}
	if err != nil {
		return nil, nil, err
	}
	if opts.Hosts != "" && fs.Lookup("m").Value.String() == "" {
		// #BSUB -m; bsub's own -m wins, and is checked with its flags.
		h, err := cli.ParseHosts(opts.Hosts)
		if err == nil {
			err = h.WholeOnly()
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if err := ov.applyArray(spec); err != nil {
		return nil, nil, fmt.Errorf("--array %s: %w", ov.array, err)
	}
	if diags := spec.Validate(); diags.HasErrors() {
		return nil, nil, errors.New(firstError(diags))
	}
	return spec, &opts, nil
}

// lsfOnlyGiven names the script-only LSF options given, for a job file.
func lsfOnlyGiven(fs *cli.FlagSet) []string {
	var given []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(lsfOnly, f.Name) {
			given = append(given, "-"+f.Name)
		}
	})
	return given
}

// stdinIsTerminal reports whether bsub's stdin is a terminal (nothing to
// read a script from) or absent.
func stdinIsTerminal(stdin io.Reader) bool {
	if f, ok := stdin.(*os.File); ok {
		st, err := f.Stat()
		return err != nil || st.Mode()&os.ModeCharDevice != 0
	}
	return false
}
