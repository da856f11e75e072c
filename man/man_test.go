package man

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
	"github.com/troupe-hpc/troupe/jobspec/script"
	"github.com/troupe-hpc/troupe/jobspec/wire"
	"github.com/troupe-hpc/troupe/nodelet/network"
	"github.com/troupe-hpc/troupe/nodelet/session"
)

// cmdDir is where the binaries' main packages live.
const cmdDir = "../cmd"

// noPage are binaries under cmdDir that need no page, and why.
var noPage = map[string]string{
	"troupe-init":  "internal: the init process nodelet mounts into containers; no one runs it by hand",
	"troupe-fence": "internal: the watchdog nodelet starts to enforce its lease; nodelet(8) FENCING documents it",
}

// handParsed names, per command, the functions that parse a command line
// by hand instead of with package flag; flagsOf counts the option letters
// of their `case 'x':` clauses as flags. Only troupe-ssh has one: invoked
// as `ssh` inside containers, its client must take OpenSSH's getopt-style
// command line (-tt, -p2200, -oPort=2200, the destination and the remote
// command after the options), which package flag cannot parse. The
// letters that switch does not decide on are OpenSSH options it accepts
// and ignores; its page names those in prose, not as OPTIONS.
var handParsed = map[string][]string{
	"troupe-ssh": {"parseClientArgs"},
}

// tableParsed are commands that read their command line getopt-style
// from tables of option{short, long, takesValue} literals (Slurm's
// commands in troupe-slurm: -nu USER, --format=%i), and what else they
// take: sbatch's job options are jobspec/script's #SBATCH table.
var tableParsed = map[string]func() []string{
	"troupe-slurm": script.SlurmOptionNames,
}

// requiredSections are the sections every page of a section must have.
var requiredSections = map[string][]string{
	"1": {"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "ENVIRONMENT", "EXIT STATUS", "EXAMPLES", "SEE ALSO"},
	"5": {"NAME", "SYNOPSIS", "DESCRIPTION", "EXAMPLES", "SEE ALSO"},
	"8": {"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SIGNALS", "FILES", "EXIT STATUS", "EXAMPLES", "SEE ALSO"},
}

// page is one manual page file.
type page struct {
	path    string // "bsub.1"
	name    string // "bsub"
	section string // "1"
	src     string
}

func pages(t *testing.T) []page {
	t.Helper()
	var out []page
	for _, sec := range []string{"1", "5", "8"} {
		files, err := filepath.Glob("*." + sec)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, page{path: f, name: strings.TrimSuffix(f, "."+sec), section: sec, src: string(b)})
		}
	}
	if len(out) == 0 {
		t.Fatal("no *.1, *.5 or *.8 pages found in man/")
	}
	return out
}

// TestRender renders every page with groff and fails on any warning or
// any output on stderr. -ww turns on every warning; -z checks the whole
// typesetting pass without writing output; -Tutf8 is what man(1) runs on
// a terminal, and must produce the page.
func TestRender(t *testing.T) {
	groff, err := exec.LookPath("groff")
	if err != nil {
		msg := "!!! groff NOT FOUND: the man pages are NOT checked. Install it: apt-get install -y groff-base !!!"
		if os.Getenv("TROUPE_REQUIRE_GROFF") != "" {
			t.Fatal(msg + " (TROUPE_REQUIRE_GROFF is set, so this is a failure)")
		}
		t.Skip(msg)
	}
	for _, p := range pages(t) {
		t.Run(p.path, func(t *testing.T) {
			for _, args := range [][]string{
				{"-man", "-ww", "-z"},
				{"-man", "-ww", "-Tutf8"},
			} {
				cmd := exec.Command(groff, append(args, p.path)...)
				cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				line := "groff " + strings.Join(args, " ") + " " + p.path
				if err != nil {
					t.Errorf("%s: %v\n%s", line, err, stderr.String())
					continue
				}
				if stderr.Len() > 0 {
					t.Errorf("%s warns:\n%s", line, stderr.String())
				}
				if slices.Contains(args, "-Tutf8") {
					// Undo grotty's overstriking (bold as "N\bN", underline as "_\bx").
					out := regexp.MustCompile(".\x08").ReplaceAllString(stdout.String(), "")
					if !strings.Contains(out, "NAME") || !strings.Contains(out, p.name) {
						t.Errorf("%s: output lacks NAME or %q:\n%.500s", line, p.name, out)
					}
				}
			}
		})
	}
}

// TestStructure checks what groff does not: the header, the sections,
// man (not mdoc) macros, ASCII input.
func TestStructure(t *testing.T) {
	thRe := regexp.MustCompile(`(?m)^\.TH (\S+) (\S+) `)
	for _, p := range pages(t) {
		t.Run(p.path, func(t *testing.T) {
			m := thRe.FindStringSubmatch(p.src)
			switch {
			case m == nil:
				t.Fatalf(".TH line missing")
			case unroff(m[1]) != strings.ToUpper(p.name) || m[2] != p.section:
				t.Errorf(".TH %s %s, want %s %s", m[1], m[2], strings.ToUpper(p.name), p.section)
			}
			for _, mdoc := range []string{".Dd ", ".Dt ", ".Sh ", ".Nm "} {
				if strings.Contains(p.src, "\n"+mdoc) {
					t.Errorf("uses the mdoc macro %s; write man macros", mdoc)
				}
			}
			for i, b := range []byte(p.src) {
				if b >= 0x80 || (b < 0x20 && b != '\n') {
					line := 1 + strings.Count(p.src[:i], "\n")
					t.Errorf("line %d: byte %#x: write ASCII and roff escapes (\\(em, \\(->)", line, b)
					break
				}
			}
			have := sections(p.src)
			for _, want := range requiredSections[p.section] {
				if !slices.Contains(have, want) {
					t.Errorf("section %q missing (has %q)", want, have)
				}
			}
			name := section(p.src, "NAME")
			if !strings.HasPrefix(strings.TrimSpace(name), p.name+` \- `) &&
				!strings.HasPrefix(strings.TrimSpace(unroff(name)), p.name+" - ") {
				t.Errorf("NAME should read %q, got %q", p.name+` \- what it does`, name)
			}
		})
	}
}

// TestEveryCommandHasPage: a binary under ../cmd without a page, or a
// section 1 or 8 page for a binary that is gone, fails.
func TestEveryCommandHasPage(t *testing.T) {
	cmds := commands(t)
	for _, c := range cmds {
		if why, ok := noPage[c]; ok {
			t.Logf("%s: no page needed: %s", c, why)
			continue
		}
		if !exists(c+".1") && !exists(c+".8") {
			t.Errorf("cmd/%s has no page: write man/%s.1 (users) or man/%s.8 (admins), or exempt it in noPage", c, c, c)
		}
	}
	for _, p := range pages(t) {
		if (p.section == "1" || p.section == "8") && !slices.Contains(cmds, p.name) {
			t.Errorf("%s documents a command with no directory under cmd/", p.path)
		}
	}
	for c := range noPage {
		if !slices.Contains(cmds, c) {
			t.Errorf("noPage exempts %s, which is not under cmd/ any more", c)
		}
	}
}

// TestOptionsMatchFlags compares, for each command, the options listed in
// its page's OPTIONS section with the flags its main package defines.
func TestOptionsMatchFlags(t *testing.T) {
	for _, c := range commands(t) {
		if _, ok := noPage[c]; ok {
			continue
		}
		path := c + ".1"
		if !exists(path) {
			path = c + ".8"
		}
		src, err := os.ReadFile(path)
		if err != nil {
			continue // TestEveryCommandHasPage reports it
		}
		t.Run(c, func(t *testing.T) {
			defined := flagsOf(t, filepath.Join(cmdDir, c))
			if len(defined) == 0 {
				t.Skipf("cmd/%s defines no flags yet (work in progress?)", c)
			}
			// The flag package answers -h and -help itself.
			defined = append(defined, "h", "help")
			documented := optionsOf(string(src))
			for _, f := range defined {
				if !slices.Contains(documented, f) {
					t.Errorf("%s: flag -%s is defined in cmd/%s but not documented under OPTIONS", path, f, c)
				}
			}
			for _, f := range documented {
				if !slices.Contains(defined, f) {
					t.Errorf("%s: OPTIONS documents -%s, which cmd/%s does not define", path, f, c)
				}
			}
		})
	}
}

// TestJobExamplesParse parses every example in troupe-job.5 marked with a
// `.\" check: hcl` (or json) comment line before its .EX.
func TestJobExamplesParse(t *testing.T) {
	src, err := os.ReadFile("troupe-job.5")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(src))
	var (
		kind string // "hcl" or "json" while in a checked example
		in   bool
		buf  strings.Builder
		line int
		at   int
	)
	for sc.Scan() {
		line++
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, `.\" check: `):
			kind, at = strings.TrimPrefix(l, `.\" check: `), line
		case l == ".EX" && kind != "":
			in = true
			buf.Reset()
		case l == ".EE" && in:
			n++
			name := "troupe-job.5:" + strconv.Itoa(at) + ".hcl"
			if kind == "json" {
				name = "troupe-job.5:" + strconv.Itoa(at) + ".json"
			}
			job, diags := jobspec.Parse(name, []byte(buf.String()))
			if len(diags) > 0 || job == nil {
				t.Errorf("example at troupe-job.5:%d does not parse cleanly:\n%s\n--- as parsed:\n%s",
					at, jobspec.FormatDiagnostics(diags), buf.String())
			}
			in, kind = false, ""
		case in:
			buf.WriteString(unroff(l))
			buf.WriteByte('\n')
		}
	}
	if n < 3 {
		t.Errorf("found %d checked examples in troupe-job.5, want at least 3 (mark them with .\\\" check: hcl)", n)
	}
}

// TestContainerVariables: the variables troupe-job.5 lists under INSIDE
// EVERY CONTAINER are exactly those nodelet/session sets for a container
// with every feature: an element of a job array, on runc on a session
// network with troupe-ssh, as
// nodelet's setupNetwork (nodelet/agent.go) configures it and buildSpec
// (nodelet/spec.go) passes to session.EnvWith. Containers with fewer
// features get a subset, which the page says in words.
func TestContainerVariables(t *testing.T) {
	src, err := os.ReadFile("troupe-job.5")
	if err != nil {
		t.Fatal(err)
	}
	spec, diags := jobspec.Parse("vars.hcl", []byte(`job "vars" {
  image   = "host"
  command = ["true"]
  role "sub" { replicas = 1 }
  role "worker" { replicas = 1 }
}`))
	if diags.HasErrors() {
		t.Fatal(jobspec.FormatDiagnostics(diags))
	}
	// An element of a job array: the array variables are set too.
	job := api.AssignedJob{ID: 7, User: "alice", SessionID: "s", Spec: wire.ToAPI(*spec),
		ArrayID: 6, ArrayIndex: 1, ArraySpan: &api.ArraySpan{Min: 1, Max: 4, Count: 4, Step: 1}}
	for _, c := range spec.Containers() {
		job.Containers = append(job.Containers, api.Container{ContainerSpec: wire.ContainerToAPI(c), KernelID: c.Host + "-id"})
	}
	full := session.Features{SessionNet: true, Iface: network.Iface, Tools: true}
	env, err := session.EnvWith(job, "sub1", full)
	if err != nil {
		t.Fatal(err)
	}
	var set []string
	for _, kv := range env {
		set = append(set, kv[:strings.IndexByte(kv, '=')])
	}
	text := unroff(section(string(src), "INSIDE EVERY CONTAINER"))
	for _, k := range set {
		if !regexp.MustCompile(`\b` + k + `\b`).MatchString(text) {
			t.Errorf("troupe-job.5 INSIDE EVERY CONTAINER does not mention %s, which nodelet/session sets (with runc on a session network)", k)
		}
	}
	for _, k := range regexp.MustCompile(`\b(?:BACKENDAI|TROUPE|LSB|OMPI|PRTE|HYDRA|NCCL|GLOO)_[A-Za-z0-9_]+\b`).FindAllString(text, -1) {
		if !slices.Contains(set, k) {
			t.Errorf("troupe-job.5 INSIDE EVERY CONTAINER names %s, which nodelet/session does not set", k)
		}
	}
}

// commands lists the directories under ../cmd.
func commands(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(cmdDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) == 0 {
		t.Fatal("no commands under ../cmd")
	}
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// flagsOf reads the flag names a main package defines: the literal name
// argument of fs.Bool("x", …), fs.StringVar(&v, "x", …), fs.Var(v, "x",
// …), fs.Alias("x", …) and kin, plus the flags internal/cli defines for
// it (--addr and --timeout with cli.NewFlagSet, -o with OutputFlag, -m
// with HostsFlag or cli.Control's Hosts, -u -t -p -J and their long
// names with SelectFlags), plus the option
// letters of the hand-written parsers handParsed names for it.
func flagsOf(t *testing.T, dir string) []string {
	t.Helper()
	byHand := map[string]bool{} // function name → found
	for _, fn := range handParsed[filepath.Base(dir)] {
		byHand[fn] = false
	}
	// Method name → index of the name argument.
	nameArg := map[string]int{
		"Bool": 0, "String": 0, "Int": 0, "Int64": 0, "Uint": 0, "Uint64": 0,
		"Float64": 0, "Duration": 0, "Func": 0, "BoolFunc": 0, "Alias": 0,
		"BoolVar": 1, "StringVar": 1, "IntVar": 1, "Int64Var": 1, "UintVar": 1,
		"Uint64Var": 1, "Float64Var": 1, "DurationVar": 1, "Var": 1, "TextVar": 1,
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	add := func(name string) {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatalf("reading flags: %v", err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil {
				continue
			}
			if _, want := byHand[fn.Name.Name]; !want {
				continue
			}
			byHand[fn.Name.Name] = true
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				cc, ok := n.(*ast.CaseClause)
				if !ok {
					return true
				}
				for _, e := range cc.List {
					if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.CHAR {
						if s, err := strconv.Unquote(lit.Value); err == nil {
							add(s)
						}
					}
				}
				return true
			})
		}
		ast.Inspect(file, func(n ast.Node) bool {
			// []option{{'x', "long", true}, ...}: a getopt table.
			if lit, ok := n.(*ast.CompositeLit); ok && tableParsed[filepath.Base(dir)] != nil {
				if at, ok := lit.Type.(*ast.ArrayType); ok {
					if id, ok := at.Elt.(*ast.Ident); ok && id.Name == "option" {
						for _, e := range lit.Elts {
							el, ok := e.(*ast.CompositeLit)
							if !ok || len(el.Elts) < 2 {
								continue
							}
							if c, ok := el.Elts[0].(*ast.BasicLit); ok && c.Kind == token.CHAR {
								if s, err := strconv.Unquote(c.Value); err == nil {
									add(s)
								}
							}
							if l, ok := el.Elts[1].(*ast.BasicLit); ok && l.Kind == token.STRING {
								if s, err := strconv.Unquote(l.Value); err == nil && s != "" {
									add(s)
								}
							}
						}
						return true
					}
				}
			}
			// cli.Control{...}.Run defines --addr and the selection flags.
			if lit, ok := n.(*ast.CompositeLit); ok {
				if t, ok := lit.Type.(*ast.SelectorExpr); ok && t.Sel.Name == "Control" {
					for _, f := range []string{"addr", "timeout", "u", "t", "state", "p", "partition", "J", "name"} {
						add(f)
					}
					// Hosts: true adds LSF's -m.
					for _, e := range lit.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Hosts" {
								if v, ok := kv.Value.(*ast.Ident); ok && v.Name == "true" {
									add("m")
								}
							}
						}
					}
				}
				return true
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch name := sel.Sel.Name; {
			case name == "NewFlagSet":
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "cli" {
					add("addr")
					add("timeout")
				}
			case name == "OutputFlag":
				add("o")
			case name == "HostsFlag": // LSF's -m
				add("m")
			case name == "EndedFilterFlags": // bhist's and bacct's filters
				for _, f := range []string{"S", "C", "since", "until", "A", "p", "s"} {
					add(f)
				}
			case name == "SelectFlags":
				for _, f := range []string{"u", "t", "state", "p", "partition", "J", "name"} {
					add(f)
				}
			default:
				i, ok := nameArg[name]
				if !ok || len(call.Args) <= i {
					return true
				}
				lit, ok := call.Args[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				if s, err := strconv.Unquote(lit.Value); err == nil {
					add(s)
				}
			}
			return true
		})
	}
	if extra, ok := tableParsed[filepath.Base(dir)]; ok {
		for _, n := range extra() {
			add(strings.TrimLeft(n, "-"))
		}
	}
	for fn, found := range byHand {
		if !found {
			t.Errorf("handParsed names %s in %s, which is not there any more", fn, dir)
		}
	}
	return out
}

// optionsOf returns the option names (without dashes) a page documents:
// those in the tag lines (the line after .TP) of its OPTIONS section.
func optionsOf(src string) []string {
	optRe := regexp.MustCompile(`(?:^|[\s"(])--?([A-Za-z][A-Za-z0-9-]*)`)
	var out []string
	lines := strings.Split(section(src, "OPTIONS"), "\n")
	for i := 0; i+1 < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != ".TP" {
			continue
		}
		tag := strings.ReplaceAll(lines[i+1], `\-`, "-")
		tag = regexp.MustCompile(`^\.[A-Z]+\s*`).ReplaceAllString(tag, " ")
		for _, m := range optRe.FindAllStringSubmatch(tag, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// sections lists the .SH headings of a page, unquoted.
func sections(src string) []string {
	var out []string
	for l := range strings.Lines(src) {
		if h, ok := strings.CutPrefix(strings.TrimRight(l, "\n"), ".SH "); ok {
			out = append(out, strings.Trim(h, `"`))
		}
	}
	return out
}

// section returns the source lines of the .SH heading named name, up to
// the next .SH.
func section(src, name string) string {
	var b strings.Builder
	in := false
	for l := range strings.Lines(src) {
		if h, ok := strings.CutPrefix(strings.TrimRight(l, "\n"), ".SH "); ok {
			in = strings.Trim(h, `"`) == name
			continue
		}
		if in {
			b.WriteString(l)
		}
	}
	return b.String()
}

// unroff undoes the escapes the pages use in literal text.
var unroffer = strings.NewReplacer(
	`\-`, "-", `\e`, `\`, `\(dq`, `"`, `\(aq`, "'", `\&`, "", `\(em`, "--",
	`\(bu`, "*", `\(mu`, "x", `\(<=`, "<=", `\(->`, "->", `\|`, "",
)

func unroff(s string) string { return unroffer.Replace(s) }

// staleClaims are things the pages once said troupe lacks and that it
// has now; a page saying one again is out of date.
var staleClaims = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`(?i)(interactive jobs|dependencies|replication)[^.:]{0,80}\b(do|does) not (yet )?exist`),
		"bsub -I, bsub -w and schedd --peers exist"},
	{regexp.MustCompile(`(?i)not supported yet`), "say what is supported, or name the limit without \"yet\""},
	{regexp.MustCompile(`(?i)register no GPUs`), "nodelets discover GPUs with NVML or --fake-gpus"},
	{regexp.MustCompile(`(?i)troupe has no[^.]{0,60}\bmail\b`), "schedd mails jobs that ask (bsub -B, -N; the mail block)"},
}

// TestNoStaleClaims fails on a page that says troupe lacks something it
// has (issue 14 item 6e: bsub(1) and schedd(8) said interactive jobs,
// dependencies and replication did not exist long after they did).
func TestNoStaleClaims(t *testing.T) {
	for _, p := range pages(t) {
		text := strings.Join(strings.Fields(strings.NewReplacer(`\-`, "-", `\fB`, "", `\fR`, "", `\fI`, "", `\fP`, "").Replace(p.src)), " ")
		for _, c := range staleClaims {
			if m := c.re.FindString(text); m != "" {
				t.Errorf("%s says %q: %s", p.path, m, c.why)
			}
		}
	}
}
