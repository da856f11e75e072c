package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/troupe-hpc/troupe/internal/client"
)

// Exit statuses every tool uses.
const (
	ExitOK    = 0
	ExitFail  = 1
	ExitUsage = 2
)

// Command describes a tool for its usage text.
type Command struct {
	Name     string // program name: "bqueue"
	Synopsis string // after the name and flags: "JOBID..."
	Summary  string // what it does, one or two sentences
	Examples []string
}

// Format is the value of -o.
type Format string

// Output formats.
const (
	FormatTable Format = "table"
	FormatJSON  Format = "json"
	FormatWide  Format = "wide" // the table with more columns (bqueue)
)

// formatValue is the flag.Value of -o: one of the allowed formats.
type formatValue struct {
	f       *Format
	allowed []Format
}

func (v formatValue) String() string {
	if v.f == nil {
		return ""
	}
	return string(*v.f)
}

func (v formatValue) Set(s string) error {
	for _, a := range v.allowed {
		if Format(s) == a {
			*v.f = a
			return nil
		}
	}
	names := make([]string, len(v.allowed))
	for i, a := range v.allowed {
		names[i] = string(a)
	}
	return fmt.Errorf("want %s", orList(names))
}

// orList is "a", "a or b", "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// StringList is a repeatable flag's values, in the order given.
type StringList []string

// String implements flag.Value.
func (l *StringList) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value.
func (l *StringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// FlagSet is a flag.FlagSet with the flags every tool shares, long flags
// shown as --name, aliases shown together, and exit handling.
type FlagSet struct {
	*flag.FlagSet
	cmd            Command
	stdout, stderr io.Writer
	addr           string
	timeout        time.Duration
	format         Format
	aliasOf        map[string]string   // alias → primary
	aliases        map[string][]string // primary → aliases
}

// NewFlagSet returns the flags of cmd with --addr already defined. Help
// goes to stdout, errors to stderr.
func NewFlagSet(cmd Command, stdout, stderr io.Writer) *FlagSet {
	fs := &FlagSet{
		FlagSet: flag.NewFlagSet(cmd.Name, flag.ContinueOnError),
		cmd:     cmd,
		stdout:  stdout,
		stderr:  stderr,
		format:  FormatTable,
		aliasOf: map[string]string{},
		aliases: map[string][]string{},
	}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&fs.addr, "addr", "", "schedd `address`: unix:///path/sock, host:port (TLS) or http://host:port\n(default: $"+client.EnvAddr+", else "+client.DefaultAddr+")")
	fs.DurationVar(&fs.timeout, "timeout", 0, "give up on schedd after `duration` (all addresses, leader changes included)\n(default: $"+client.EnvTimeout+", else "+client.DefaultTimeout.String()+")")
	return fs
}

// OutputFlag defines -o table|json, plus the extra formats given (such as
// FormatWide); read the choice with Format. The first line of its usage
// stays "output format: table or json", which completion reads choices
// from; extra formats are named on the next line.
func (fs *FlagSet) OutputFlag(extra ...Format) {
	usage := "output `format`: table or json"
	for _, e := range extra {
		switch e {
		case FormatWide:
			usage += "\nor wide: the table with more columns"
		default:
			usage += "\nor " + string(e)
		}
	}
	allowed := append([]Format{FormatTable, FormatJSON}, extra...)
	fs.Var(formatValue{f: &fs.format, allowed: allowed}, "o", usage)
}

// Format is the -o choice (table when not given or not defined).
func (fs *FlagSet) Format() Format { return fs.format }

// Addr is where schedd is: --addr, else $TROUPE_ADDR, else the default.
func (fs *FlagSet) Addr() string { return client.ResolveAddr(fs.addr) }

// Client returns a client for Addr with --timeout's limit. It warns on
// stderr about clear-text (http://) addresses, and says there when a
// write is sent again after its answer was lost.
func (fs *FlagSet) Client() (*client.Client, error) {
	c, err := client.New(fs.Addr())
	if err != nil {
		return nil, err
	}
	if fs.timeout < 0 {
		return nil, fmt.Errorf("--timeout %s: want a positive duration", fs.timeout)
	}
	if fs.timeout > 0 {
		c.SetTimeout(fs.timeout)
	}
	for _, a := range c.Plain() {
		fmt.Fprintf(fs.stderr, "%s: warning: %s is plain http: requests and answers cross the network in clear text and no token is sent to it; use https:// or host:port\n", fs.cmd.Name, a)
	}
	name, stderr := fs.cmd.Name, fs.stderr
	c.OnRetry(func(msg string) { fmt.Fprintf(stderr, "%s: %s\n", name, msg) })
	return c, nil
}

// Alias makes alias another name of the already defined flag primary.
func (fs *FlagSet) Alias(alias, primary string) {
	f := fs.Lookup(primary)
	if f == nil {
		panic("cli: alias of undefined flag " + primary)
	}
	fs.FlagSet.Var(f.Value, alias, f.Usage)
	fs.aliasOf[alias] = primary
	fs.aliases[primary] = append(fs.aliases[primary], alias)
}

// Parse parses args, allowing flags after positional arguments ("bkill 5
// -addr x"); "--" ends the flags. It returns the positional arguments.
// On error, pass the error to Exit.
func (fs *FlagSet) Parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.FlagSet.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// Exit handles an error of Parse: for -h it prints the usage to stdout and
// returns 0; otherwise it prints the error as one line and a hint, and
// returns 2.
func (fs *FlagSet) Exit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		fs.PrintUsage(fs.stdout)
		return ExitOK
	}
	return fs.UsageError("%s", err.Error())
}

// UsageError prints "prog: message" and a hint to run -h, and returns 2.
func (fs *FlagSet) UsageError(format string, args ...any) int {
	fmt.Fprintf(fs.stderr, "%s: %s\n", fs.cmd.Name, oneLine(fmt.Sprintf(format, args...)))
	fmt.Fprintf(fs.stderr, "Run '%s -h' for usage.\n", fs.cmd.Name)
	return ExitUsage
}

// PrintUsage writes the full usage text to w.
func (fs *FlagSet) PrintUsage(w io.Writer) {
	c := fs.cmd
	fmt.Fprintf(w, "Usage: %s [flags]", c.Name)
	if c.Synopsis != "" {
		fmt.Fprintf(w, " %s", c.Synopsis)
	}
	fmt.Fprintf(w, "\n\n%s\n\nFlags:\n", c.Summary)
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := fs.aliasOf[f.Name]; !ok {
			names = append(names, f.Name)
		}
	})
	sort.Strings(names)
	for _, name := range names {
		f := fs.Lookup(name)
		all := append([]string{name}, fs.aliases[name]...)
		var shown []string
		for _, n := range all {
			shown = append(shown, dashed(n))
		}
		head := strings.Join(shown, ", ")
		arg, usage := flag.UnquoteUsage(f)
		if arg != "" {
			head += " " + arg
		}
		fmt.Fprintf(w, "  %s\n", head)
		for line := range strings.SplitSeq(usage, "\n") {
			fmt.Fprintf(w, "        %s\n", line)
		}
	}
	if len(c.Examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, e := range c.Examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}
