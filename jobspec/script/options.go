package script

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/jobspec"
)

// Options are what a script's directives and bsub's options ask for.
// Zero values are "not given".
type Options struct {
	Name, Partition, Account, Group string
	// Reservation is LSF's -U and Slurm's --reservation.
	Reservation   string
	QOS           string // Slurm --qos, bsub --qos
	Output, Error string
	Cwd           string
	Image         string
	Walltime      time.Duration
	Depend        *api.Dependency
	Hold          bool
	// Array makes the job a job array: LSF's -J "name[1-100%10]",
	// Slurm's --array=1-100%10.
	Array *jobspec.Array
	// Mail is what -B, -N, -u, --mail-type and --mail-user ask for (nil:
	// none given).
	Mail *jobspec.Mail
	// Singleton is Slurm's --dependency=singleton: start after every
	// earlier unfinished job of the same name and user; the submitting
	// command resolves it (cli.SingletonDependency).
	Singleton bool
	// Signal is Slurm's --signal: the warning signal before the time
	// limit (nil: none). WarnAction and WarnTime are LSF's -wa and -wt,
	// which make one together (warning).
	Signal               *jobspec.Warning
	WarnAction, WarnTime string
	// Hosts is LSF's -m in a #BSUB line: host or cluster names; the
	// submitting command decides what they may name.
	Hosts string

	// Slots are LSF's -n and Slurm's --ntasks: tasks of CPUsPerTask cores.
	Slots        int
	CPUsPerTask  int // Slurm -c
	Nodes        int // Slurm -N, LSF -nnodes: containers
	TasksPerNode int // Slurm --ntasks-per-node, LSF span[ptile=K]
	OneHost      bool
	Memory       int64 // per container, bytes (LSF -M and select[mem], Slurm --mem)
	MemPerSlot   int64 // LSF rusage[mem]: per slot, bytes
	MemPerCPU    int64 // Slurm --mem-per-cpu, bytes
	GPU          float64
	// Licenses are the site-wide licenses asked for: Slurm's -L
	// name[:count],…, LSF's rusage[name=count] for a name that is not
	// one of LSF's built-in resources.
	Licenses map[string]int

	Env Env

	// Warnings are the options accepted but not honoured, and unknown ones.
	Warnings []Warning
	warned   map[string]bool
}

// Env is the environment policy: LSF's -env and Slurm's --export.
type Env struct {
	Set     bool              // a policy was given
	All     bool              // the submitter's whole environment
	Names   []string          // without All: only these of the submitter's
	Exclude []string          // with All: all but these (LSF's ~VAR)
	Values  map[string]string // VAR=value: set to value
}

// option is one option of a dialect's table.
type option struct {
	arg bool // takes a value
	set func(o *Options, value string, at site) error
}

// site is where an option was given, for messages.
type site struct {
	dialect Dialect
	line    int
	name    string // as written: "-n", "--ntasks"
}

func (s site) String() string {
	if s.line == 0 {
		return s.name
	}
	return fmt.Sprintf("line %d: #%s %s", s.line, s.dialect, s.name)
}

// warnOnce records a warning for an accepted option troupe ignores.
func (o *Options) warnOnce(at site, msg string) {
	if o.warned == nil {
		o.warned = map[string]bool{}
	}
	if o.warned[at.name] {
		return
	}
	o.warned[at.name] = true
	o.Warnings = append(o.Warnings, Warning{Line: at.line, Option: at.name, Msg: msg})
}

func ignored(what string) func(*Options, string, site) error {
	return func(o *Options, _ string, at site) error {
		o.warnOnce(at, "accepted and ignored: troupe has no "+what)
		return nil
	}
}

// warning is the warning signal o asks for: Slurm's --signal, or LSF's
// -wa and -wt, which must come together.
func (o *Options) warning() (*jobspec.Warning, error) {
	if o.WarnAction == "" && o.WarnTime == "" {
		if o.Signal == nil {
			return nil, nil
		}
		w := *o.Signal
		return &w, nil
	}
	return jobspec.ParseLSFWarning(o.WarnAction, o.WarnTime)
}

// mail is o.Mail, made when first asked for.
func (o *Options) mail() *jobspec.Mail {
	if o.Mail == nil {
		o.Mail = &jobspec.Mail{}
	}
	return o.Mail
}

// mailUser is LSF's -u and Slurm's --mail-user: who gets the mail.
func mailUser(o *Options, v string, _ site) error {
	if _, err := jobspec.MailAddresses(v); err != nil {
		return err
	}
	o.mail().To = strings.TrimSpace(v)
	return nil
}

func str(f func(*Options) *string) func(*Options, string, site) error {
	return func(o *Options, v string, _ site) error {
		*f(o) = v
		return nil
	}
}

func positive(f func(*Options) *int) func(*Options, string, site) error {
	return func(o *Options, v string, _ site) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return errors.New("want a whole number of at least 1")
		}
		*f(o) = n
		return nil
	}
}

// lsfOptions are bsub's options, in #BSUB lines and on the command line.
var lsfOptions = map[string]option{
	"-n": {true, func(o *Options, v string, _ site) error {
		// -n min,max: LSF starts the job with at least min; ask for max.
		lo, hi, ok := strings.Cut(v, ",")
		if ok {
			v = hi
		} else {
			v = lo
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return errors.New("want a number of slots (or min,max), at least 1")
		}
		o.Slots = n
		return nil
	}},
	"-nnodes": {true, positive(func(o *Options) *int { return &o.Nodes })},
	"-W": {true, func(o *Options, v string, _ site) error {
		d, err := ParseLSFWalltime(v)
		o.Walltime = d
		return err
	}},
	"-q":   {true, str(func(o *Options) *string { return &o.Partition })},
	"-J":   {true, func(o *Options, v string, _ site) error { return o.name(v) }},
	"-o":   {true, func(o *Options, v string, _ site) error { o.Output = LSFPattern(v); return nil }},
	"-oo":  {true, func(o *Options, v string, _ site) error { o.Output = LSFPattern(v); return nil }},
	"-e":   {true, func(o *Options, v string, _ site) error { o.Error = LSFPattern(v); return nil }},
	"-eo":  {true, func(o *Options, v string, _ site) error { o.Error = LSFPattern(v); return nil }},
	"-P":   {true, str(func(o *Options) *string { return &o.Account })},
	"-G":   {true, str(func(o *Options) *string { return &o.Group })},
	"-cwd": {true, str(func(o *Options) *string { return &o.Cwd })},
	"-R":   {true, func(o *Options, v string, at site) error { return o.resReq(v, at) }},
	"-M": {true, func(o *Options, v string, _ site) error {
		b, err := ParseLSFMemory(strings.TrimSuffix(strings.TrimSpace(v), "!"))
		if err != nil {
			return err
		}
		o.Memory = max(o.Memory, b)
		return nil
	}},
	"-gpu": {true, func(o *Options, v string, _ site) error {
		if v == "-" {
			o.GPU = 1
			return nil
		}
		for kv := range strings.SplitSeq(v, ":") {
			if k, n, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && k == "num" {
				g, err := strconv.ParseFloat(n, 64)
				if err != nil || g <= 0 || math.IsInf(g, 0) {
					return fmt.Errorf("num=%s: want a number of GPUs", n)
				}
				o.GPU = g
			}
		}
		return nil
	}},
	"-env": {true, func(o *Options, v string, _ site) error { return o.Env.parse(v, "all", "none", ",") }},
	"-w": {true, func(o *Options, v string, _ site) error {
		d, err := api.ParseDependency(v)
		o.Depend = d
		return err
	}},
	"-H": {false, func(o *Options, _ string, _ site) error { o.Hold = true; return nil }},
	"-wa": {true, func(o *Options, v string, _ site) error {
		_, err := jobspec.ParseWarnSignal(v)
		o.WarnAction = v
		return err
	}},
	"-wt":    {true, str(func(o *Options) *string { return &o.WarnTime })},
	"-m":     {true, str(func(o *Options) *string { return &o.Hosts })},
	"-app":   {true, str(func(o *Options) *string { return &o.Image })},
	"-image": {true, str(func(o *Options) *string { return &o.Image })},
	"-x":     {false, ignored("exclusive nodes; the job shares its nodes within its resources")},
	"-L":     {true, ignored("login shell; the script runs under its #! interpreter or /bin/sh")},
	"-B":     {false, func(o *Options, _ string, _ site) error { o.mail().Begin = true; return nil }},
	"-N":     {false, func(o *Options, _ string, _ site) error { o.mail().End = true; return nil }},
	"-u":     {true, mailUser},
	"-U":     {true, str(func(o *Options) *string { return &o.Reservation })},
	"-sp":    {true, ignored("user priority per job; use the job file's priority")},
	"-r":     {false, ignored("rerun on host failure for script jobs; use the job file's requeue")},
	"-rn":    {false, ignored("rerun control")},
	"-b":     {true, ignored("begin time; submit when the job may start")},
	"-i":     {true, ignored("standard input file; the job's stdin is empty")},
	"-K":     {false, ignored("-K inside a script; give it on the command line")},
	"-I":     {false, ignored("-I inside a script; give it on the command line")},
}

// slurmOptions are sbatch's options in #SBATCH lines, by long name; the
// short forms map to them in slurmShort.
var slurmOptions = map[string]option{
	"--nodes":           {true, positive(func(o *Options) *int { return &o.Nodes })},
	"--ntasks":          {true, positive(func(o *Options) *int { return &o.Slots })},
	"--cpus-per-task":   {true, positive(func(o *Options) *int { return &o.CPUsPerTask })},
	"--ntasks-per-node": {true, positive(func(o *Options) *int { return &o.TasksPerNode })},
	"--mem": {true, func(o *Options, v string, _ site) error {
		b, err := ParseSlurmMemory(v)
		o.Memory = b
		return err
	}},
	"--mem-per-cpu": {true, func(o *Options, v string, _ site) error {
		b, err := ParseSlurmMemory(v)
		o.MemPerCPU = b
		return err
	}},
	"--time": {true, func(o *Options, v string, _ site) error {
		d, err := jobspec.ParseWalltime(v)
		if err != nil || d <= 0 {
			return errors.New("want minutes, MM:SS, HH:MM:SS or D-HH[:MM[:SS]], more than 0")
		}
		o.Walltime = d
		return nil
	}},
	"--job-name":    {true, str(func(o *Options) *string { return &o.Name })},
	"--output":      {true, func(o *Options, v string, _ site) error { o.Output = slurmPattern(v); return nil }},
	"--error":       {true, func(o *Options, v string, _ site) error { o.Error = slurmPattern(v); return nil }},
	"--partition":   {true, str(func(o *Options) *string { return &o.Partition })},
	"--account":     {true, str(func(o *Options) *string { return &o.Account })},
	"--reservation": {true, str(func(o *Options) *string { return &o.Reservation })},
	"--chdir":       {true, str(func(o *Options) *string { return &o.Cwd })},
	"--licenses":    {true, slurmLicenses},
	"--gres": {true, func(o *Options, v string, at site) error {
		for g := range strings.SplitSeq(v, ",") {
			parts := strings.Split(g, ":")
			if parts[0] != "gpu" {
				o.warnOnce(at, fmt.Sprintf("gres %q ignored: troupe schedules gpu only", g))
				continue
			}
			n := parts[len(parts)-1]
			if len(parts) == 1 {
				n = "1"
			}
			k, err := strconv.Atoi(n)
			if err != nil || k < 0 {
				return fmt.Errorf("%s: want gpu[:type]:N", g)
			}
			o.GPU = float64(k)
		}
		return nil
	}},
	"--gpus-per-node": {true, func(o *Options, v string, _ site) error {
		_, n, ok := strings.Cut(v, ":")
		if !ok {
			n = v
		}
		k, err := strconv.Atoi(n)
		if err != nil || k < 0 {
			return errors.New("want [type:]N")
		}
		o.GPU = float64(k)
		return nil
	}},
	"--dependency": {true, func(o *Options, v string, _ site) error {
		if strings.EqualFold(strings.TrimSpace(v), "singleton") {
			o.Singleton, o.Depend = true, nil
			return nil
		}
		d, err := api.ParseDependency(v)
		o.Depend, o.Singleton = d, false
		return err
	}},
	"--export":    {true, func(o *Options, v string, _ site) error { return o.Env.parse(v, "ALL", "NONE", ",") }},
	"--hold":      {false, func(o *Options, _ string, _ site) error { o.Hold = true; return nil }},
	"--exclusive": {false, ignored("exclusive nodes; the job shares its nodes within its resources")},
	"--array": {true, func(o *Options, v string, _ site) error {
		a, err := jobspec.ArrayFromSpec(v)
		o.Array = a
		return err
	}},
	"--mail-type": {true, func(o *Options, v string, at site) error {
		ignored, err := jobspec.ParseMailTypes(o.mail(), v)
		for _, t := range ignored {
			o.warnOnce(site{dialect: at.dialect, line: at.line, name: at.name + "=" + t},
				"accepted and ignored: troupe mails at BEGIN, END and FAIL only")
		}
		return err
	}},
	"--mail-user":  {true, mailUser},
	"--comment":    {true, func(*Options, string, site) error { return nil }},
	"--no-requeue": {false, func(*Options, string, site) error { return nil }},
	"--requeue":    {false, ignored("requeue for script jobs; use the job file's requeue")},
	"--signal": {true, func(o *Options, v string, _ site) error {
		w, err := jobspec.ParseSlurmSignal(v)
		o.Signal = w
		return err
	}},
	"--qos":            {true, str(func(o *Options) *string { return &o.QOS })},
	"--constraint":     {true, ignored("node features")},
	"--nice":           {true, ignored("nice for script jobs; use the job file's priority")},
	"--priority":       {true, ignored("user priority per job; use the job file's priority")},
	"--begin":          {true, ignored("begin time; submit when the job may start")},
	"--exclude":        {true, ignored("node exclusion; drain a node that must take no jobs")},
	"--ntasks-per-gpu": {true, ignored("tasks per GPU; --ntasks and --gpus-per-node shape the job")},
	"--input":          {true, ignored("standard input file; the job's stdin is empty")},
	"--open-mode":      {true, func(*Options, string, site) error { return nil }},
	"--parsable":       {false, func(*Options, string, site) error { return nil }},
}

var slurmShort = map[string]string{
	"-N": "--nodes", "-n": "--ntasks", "-c": "--cpus-per-task", "-t": "--time",
	"-J": "--job-name", "-o": "--output", "-e": "--error", "-p": "--partition",
	"-A": "--account", "-D": "--chdir", "-d": "--dependency", "-H": "--hold",
	"-a": "--array", "-q": "--qos", "-C": "--constraint", "-x": "--exclude",
	"-i": "--input", "-L": "--licenses",
}

// parseArgs applies the options words of one directive line (or of the
// command line, line 0).
func (o *Options) parseArgs(d Dialect, line int, words []string) error {
	for i := 0; i < len(words); i++ {
		w := words[i]
		name, value, hasValue := w, "", false
		var opt option
		var ok bool
		if d == Slurm {
			if strings.HasPrefix(w, "--") {
				name, value, hasValue = strings.Cut(w, "=")
			} else if len(w) > 2 && strings.HasPrefix(w, "-") {
				name, value, hasValue = w[:2], w[2:], true
			}
			if long, isShort := slurmShort[name]; isShort {
				name = long
			}
			opt, ok = slurmOptions[name]
		} else {
			opt, ok = lsfOptions[name]
		}
		at := site{dialect: d, line: line, name: name}
		if !ok {
			if !strings.HasPrefix(w, "-") {
				o.Warnings = append(o.Warnings, Warning{Line: line, Option: w,
					Msg: fmt.Sprintf("not an option of #%s; ignored (a value must follow its option)", d)})
				continue
			}
			o.Warnings = append(o.Warnings, Warning{Line: line, Option: name,
				Msg: fmt.Sprintf("unknown #%s option; ignored", d)})
			if d == Slurm && !hasValue && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
				i++ // its value
			} else if d == LSF && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
				i++
			}
			continue
		}
		if opt.arg && !hasValue {
			if i+1 >= len(words) {
				return fmt.Errorf("%w: %s: needs a value", ErrDirective, at)
			}
			i++
			value = words[i]
		} else if !opt.arg && hasValue && d == Slurm && strings.HasPrefix(w, "--") {
			return fmt.Errorf("%w: %s: takes no value", ErrDirective, at)
		}
		if err := opt.set(o, value, at); err != nil {
			return fmt.Errorf("%w: %s %s: %v", ErrDirective, at, value, err)
		}
	}
	return nil
}

// Set applies bsub's command-line option name ("-n", "-R") with value
// (ignored for options that take none), as a directive of line 0: it
// wins over the script's. It reports whether name is a script option.
func (o *Options) Set(name, value string) (bool, error) {
	opt, ok := lsfOptions[name]
	if !ok {
		return false, nil
	}
	at := site{dialect: Command, name: name}
	if err := opt.set(o, value, at); err != nil {
		return true, fmt.Errorf("%s %s: %v", name, value, err)
	}
	return true, nil
}

// SlurmOption resolves sbatch's option name ("-n", "--ntasks", or a
// unique prefix of a long name: "--ntask") to its long name in the
// table #SBATCH lines use, and reports whether it takes a value. The
// command line and the directives share that one table.
func SlurmOption(name string) (long string, known, takesValue bool) {
	if l, ok := slurmShort[name]; ok {
		name = l
	}
	if opt, ok := slurmOptions[name]; ok {
		return name, true, opt.arg
	}
	if !strings.HasPrefix(name, "--") || len(name) < 4 {
		return name, false, false
	}
	var match string
	for n := range slurmOptions {
		if strings.HasPrefix(n, name) {
			if match != "" {
				return name, false, false // ambiguous, as getopt_long
			}
			match = n
		}
	}
	if match == "" {
		return name, false, false
	}
	return match, true, slurmOptions[match].arg
}

// SlurmOptionNames are sbatch's job options troupe knows, long ("--nodes")
// and short ("-N"): #SBATCH's and sbatch's command line's, sorted.
func SlurmOptionNames() []string {
	var names []string
	for n := range slurmOptions {
		names = append(names, n)
	}
	for n := range slurmShort {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// SetSlurm applies sbatch's command-line option long (a name
// SlurmOption returned) with value: it wins over the script's #SBATCH
// lines. An option troupe accepts but ignores adds a warning.
func (o *Options) SetSlurm(long, value string) error {
	opt, ok := slurmOptions[long]
	if !ok {
		return fmt.Errorf("%s: not an sbatch option troupe knows", long)
	}
	at := site{dialect: Command, name: long}
	if err := opt.set(o, value, at); err != nil {
		if opt.arg {
			return fmt.Errorf("%s %s: %v", long, value, err)
		}
		return fmt.Errorf("%s: %v", long, err)
	}
	return nil
}

// LSFOption reports whether name ("-R") is one of bsub's LSF options
// and whether it takes a value.
func LSFOption(name string) (known, takesValue bool) {
	opt, ok := lsfOptions[name]
	return ok, opt.arg
}

// LSFOptions are the names of bsub's LSF options, for its flag set.
func LSFOptions() []string {
	names := make([]string, 0, len(lsfOptions))
	for n := range lsfOptions {
		names = append(names, n)
	}
	return names
}

// resReq reads an LSF resource requirement string: select[], rusage[]
// and span[] sections (a string with no section is a select).
func (o *Options) resReq(s string, at site) error {
	secs := resSection().FindAllStringSubmatch(s, -1)
	if len(secs) == 0 && strings.TrimSpace(s) != "" {
		secs = [][]string{{s, "select", s}}
	}
	for _, m := range secs {
		name, body := m[1], m[2]
		switch name {
		case "span":
			for kv := range strings.SplitSeq(body, ",") {
				k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
				n, err := strconv.Atoi(strings.TrimSpace(v))
				switch {
				case k == "hosts" && err == nil && n == 1:
					o.OneHost = true
				case k == "hosts" && err == nil && n == -1:
				case k == "ptile" && err == nil && n >= 1:
					o.TasksPerNode = n
				default:
					return fmt.Errorf("span[%s]: want hosts=1 or ptile=K", body)
				}
			}
		case "rusage":
			// Each item is name=value[:name=value]…, with duration= and
			// decay= among them (how long LSF reserves; troupe holds for
			// the whole run).
			for kv := range rusageItems(body) {
				k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
				v = strings.TrimSuffix(strings.TrimSpace(v), "/host")
				switch strings.TrimSpace(k) {
				case "duration", "decay":
				case "mem":
					b, err := ParseLSFMemory(v)
					if err != nil {
						return fmt.Errorf("rusage[mem=%s]: %v", v, err)
					}
					o.MemPerSlot = b
				case "ngpus_physical", "ngpus":
					g, err := strconv.ParseFloat(v, 64)
					if err != nil || g < 0 || math.IsInf(g, 0) {
						return fmt.Errorf("rusage[%s=%s]: want a number", k, v)
					}
					o.GPU = g
				case "":
				default:
					name := strings.TrimSpace(k)
					if lsfBuiltin[name] {
						o.warnOnce(site{at.dialect, at.line, at.name + " rusage[" + name + "]"}, "accepted and ignored: troupe reserves cpu, mem, gpu and licenses only")
						continue
					}
					n, err := licenseCount(v)
					if err != nil {
						return fmt.Errorf("rusage[%s=%s]: %v (a resource that is not one of LSF's built-in ones is a license of the site)", name, v, err)
					}
					o.addLicense(name, n)
				}
			}
		case "select":
			if mm := selectMem().FindStringSubmatch(body); mm != nil {
				b, err := ParseLSFMemory(mm[1])
				if err != nil {
					return fmt.Errorf("select[mem>=%s]: %v", mm[1], err)
				}
				o.Memory = max(o.Memory, b)
			} else {
				o.warnOnce(site{at.dialect, at.line, at.name + " select[]"}, "accepted and ignored: troupe selects on mem only")
			}
		default:
			o.warnOnce(site{at.dialect, at.line, at.name + " " + name + "[]"}, "accepted and ignored")
		}
	}
	return nil
}

var (
	// The regexps here are compiled on first use, not at the start of every
	// command that links this package (bsub starts in a few milliseconds).
	resSection = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(select|rusage|span|order|same|cu|affinity)\s*\[([^\]]*)\]`)
	})
	selectMem = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`mem\s*>=?\s*([0-9.]+\s*[A-Za-z]*)`) })
)

// name sets the job name from LSF's -J: "sweep[1-100%10]" names an array
// sweep of elements 1 to 100, at most 10 running at once.
func (o *Options) name(v string) error {
	base, rng, ok := jobspec.SplitArrayName(v)
	if !ok {
		o.Name = v
		return nil
	}
	a, err := jobspec.ArrayFromSpec(rng)
	if err != nil {
		return err
	}
	o.Name, o.Array = base, a
	return nil
}

// LSFPattern turns LSF's %J (the job id) into troupe's %j; %I (the
// element's index) and %x (the name) stay.
func LSFPattern(p string) string { return translateEscapes(p, map[byte]byte{'J': 'j'}) }

// slurmPattern turns Slurm's escapes into troupe's: %A (the array's job
// id) and %J (jobid.stepid, which for a batch script is the job id
// alone: its step has no number) into %j, %N (the node) into %h.
func slurmPattern(p string) string {
	return translateEscapes(p, map[byte]byte{'A': 'j', 'J': 'j', 'N': 'h'})
}

// translateEscapes rewrites each %c of pattern that to names as %to[c];
// %% and every other escape stay as written, so "%%J" is still a
// literal %J.
func translateEscapes(pattern string, to map[byte]byte) string {
	b := []byte(pattern)
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '%' {
			continue
		}
		if c, ok := to[b[i+1]]; ok {
			b[i+1] = c
		}
		i++
	}
	return string(b)
}

// ExpandName replaces %x in an output pattern with the job's name, as
// LSF and Slurm do; %% stays for the node to read.
func ExpandName(pattern, name string) string {
	if !strings.Contains(pattern, "%x") {
		return pattern
	}
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == '%' && i+1 < len(pattern) {
			if pattern[i+1] == 'x' {
				b.WriteString(strings.ReplaceAll(name, "%", "%%"))
			} else {
				b.WriteString(pattern[i : i+2])
			}
			i++
			continue
		}
		b.WriteByte(pattern[i])
	}
	return b.String()
}

// lsfWalltime is LSF's -W [HH:]MM: one colon means hours:minutes (Slurm's
// and jobspec's M:SS would read it as minutes:seconds).
var lsfWalltime = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+):([0-9]+)$`) })

// ErrLSFWalltime is ParseLSFWalltime's refusal of a value it cannot read
// or that is not more than 0.
var ErrLSFWalltime = errors.New("want [HH:]MM, days-HH:MM:SS or a duration such as 2h, more than 0")

// ParseLSFWalltime reads LSF's -W, as bsub's flag and as a #BSUB
// directive: [HH:]MM (one colon is hours:minutes, as LSF reads it), or
// any form jobspec.ParseWalltime reads. The limit must be more than 0.
func ParseLSFWalltime(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if m := lsfWalltime().FindStringSubmatch(s); m != nil {
		h, _ := strconv.Atoi(m[1])
		mi, _ := strconv.Atoi(m[2])
		if mi >= 60 {
			return 0, fmt.Errorf("minutes %d out of range in HH:MM", mi)
		}
		if d := time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute; d > 0 {
			return d, nil
		}
		return 0, ErrLSFWalltime
	}
	d, err := jobspec.ParseWalltime(s)
	if err != nil || d <= 0 {
		return 0, ErrLSFWalltime
	}
	return d, nil
}

var memRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)$`) })

// parseMem reads a number with an optional K, M, G, T (B optional)
// unit, powers of 1024; a bare number is in unit bytes.
func parseMem(s string, unit float64, what string) (int64, error) {
	m := memRe().FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("want a %s", what)
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("want a %s", what)
	}
	switch strings.TrimSuffix(strings.ToUpper(m[2]), "B") {
	case "":
		if m[2] != "" { // "B"
			unit = 1
		}
	case "K":
		unit = 1 << 10
	case "M":
		unit = 1 << 20
	case "G":
		unit = 1 << 30
	case "T":
		unit = 1 << 40
	default:
		return 0, fmt.Errorf("unknown unit %q; want a %s", m[2], what)
	}
	b := n * unit
	if b < 1 || b >= math.MaxInt64/2 {
		return 0, fmt.Errorf("%s out of range", s)
	}
	return int64(b), nil
}

// LSFUnitForLimits is the unit of a memory limit without one (-M,
// rusage[mem], select[mem]): KB, LSF_UNIT_FOR_LIMITS's default, which
// `badmin showconf mbd` reports.
const LSFUnitForLimits = "KB"

// ParseLSFMemory reads an LSF memory amount: KB unless a unit (KB, MB,
// GB, TB, or K, M, G, T) is given; powers of 1024, as LSF's.
func ParseLSFMemory(s string) (int64, error) {
	return parseMem(s, 1<<10, "memory size such as 4000 (KB), 500MB or 4GB")
}

// ParseSlurmMemory reads sbatch --mem: MB unless a unit (K, M, G, T) is
// given, as Slurm's.
func ParseSlurmMemory(s string) (int64, error) {
	return parseMem(s, 1<<20, "memory size such as 4000 (MB), 500M or 4G")
}

// parse reads an environment policy: LSF's -env ("all", "none",
// "all, ~VAR", "VAR1, VAR2=value") or Slurm's --export ("ALL", "NONE",
// "ALL,VAR=value", "VAR1,VAR2").
func (e *Env) parse(s, all, none, sep string) error {
	*e = Env{Set: true}
	for item := range strings.SplitSeq(s, sep) {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
		case strings.EqualFold(item, all):
			e.All = true
		case strings.EqualFold(item, none):
		case strings.HasPrefix(item, "~"):
			e.Exclude = append(e.Exclude, strings.TrimSpace(item[1:]))
		default:
			k, v, ok := strings.Cut(item, "=")
			if !envName().MatchString(k) {
				return fmt.Errorf("%q is not a variable name", k)
			}
			if ok {
				if e.Values == nil {
					e.Values = map[string]string{}
				}
				e.Values[k] = v
			} else {
				e.Names = append(e.Names, k)
			}
		}
	}
	if len(e.Exclude) > 0 && !e.All {
		return errors.New("~VAR excludes from all: write \"all, ~VAR\"")
	}
	return nil
}

var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
